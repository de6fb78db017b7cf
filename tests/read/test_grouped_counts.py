"""Counts from the rollups are exact. Summed per group of streams (what volume, stats and
`sum by (...)` of a count read), a group where retention or a delete request hides lines of
some streams but not of others counts exactly the visible lines, bucket by bucket; a window
whose edges fall inside a minute counts the lines between the minute and the edge."""

from __future__ import annotations

import pytest

from logql.model import MINUTE_NS, canonical_labels
from services.read.visibility import VisibleReader
from storage.db import connect, migrate
from storage.entries import PreparedStream, append
from storage.stream_ids import StreamIds
from storage.reader import LogReader

NS = 10**9
T0 = 1_700_000_000 * NS - (1_700_000_000 * NS) % MINUTE_NS   # a whole minute
CUTOFF = T0 + 7 * MINUTE_NS + 13 * NS        # stream 1 hides what is older (retention)
DELETED = (T0 + 2 * MINUTE_NS, T0 + 9 * MINUTE_NS)  # stream 2: lines with "drop" in it


def _rows(k: int) -> list[tuple[int, int, str, str | None]]:
    """20 lines over 10 minutes, some exactly on a minute, some with metadata."""
    out = []
    for i in range(20):
        ts = T0 + i * 30 * NS + (0 if i % 4 == 0 else 7 * NS + k)
        md = '{"trace":"t%d"}' % (i % 2) if i % 3 == 0 else None
        out.append((ts, i, f"s{k} line {i}" + (" drop" if i % 2 else ""), md))
    return out


STREAMS = {k: _rows(k) for k in range(4)}


@pytest.fixture
def reader(tmp_path):
    conn = connect(str(tmp_path / "logstore.db"))
    migrate(conn)
    prepared = []
    for k, rows in STREAMS.items():
        labels = {"app": "g", "k": str(k)}
        prepared.append(PreparedStream(labels, canonical_labels(labels), rows,
                                       rows[0][0], rows[-1][0]))
    append(conn, StreamIds(), "t", prepared)
    inner = LogReader(conn)
    ids = {labels_k: sid for sid, labels_k in conn.execute(
        "SELECT id, labels FROM streams ORDER BY id")}
    sid_of = {k: ids[canonical_labels({"app": "g", "k": str(k)})] for k in STREAMS}

    def cutoff_of(_tenant, labels):
        return CUTOFF if labels["k"] == "1" else None

    def deletes_of(_tenant, labels):
        return [(*DELETED, lambda line: "drop" in line)] if labels["k"] == "2" else []

    visible = VisibleReader(inner, cutoff_of, deletes_of)
    yield visible, sid_of
    conn.close()


def _visible(k: int, ts: int, line: str) -> bool:
    if k == 1 and ts < CUTOFF:
        return False
    return not (k == 2 and DELETED[0] <= ts <= DELETED[1] and "drop" in line)


def _expected(ks, points):
    """Visible lines and bytes of streams `ks` in each bucket (p[i], p[i+1]]."""
    lines = [0] * (len(points) - 1)
    sizes = [0] * (len(points) - 1)
    for k in ks:
        for ts, _, line, _ in STREAMS[k]:
            for i in range(len(points) - 1):
                if points[i] < ts <= points[i + 1] and _visible(k, ts, line):
                    lines[i] += 1
                    sizes[i] += len(line.encode())
    return lines, sizes


@pytest.mark.parametrize("points", [
    # volume's buckets: [m, m') as (m - 1, m' - 1], of unequal widths
    [T0 - 1, T0 + 3 * MINUTE_NS - 1, T0 + 4 * MINUTE_NS - 1, T0 + 11 * MINUTE_NS - 1],
    [T0 - 1, T0 + 11 * MINUTE_NS - 1],
    # an even, minute-aligned grid (lines exactly on a point belong to the bucket it ends)
    [T0 + i * 2 * MINUTE_NS for i in range(-1, 7)],
])
def test_a_group_counts_only_its_visible_lines(reader, points):
    visible, sid_of = reader
    # group 0: the retention-cut stream, the one with deleted lines and an untouched one;
    # group 1: an untouched one alone
    group_of = {sid_of[0]: 0, sid_of[1]: 0, sid_of[2]: 0, sid_of[3]: 1}
    with visible.inner.snapshot():
        visible.select_streams("t", [], T0 - MINUTE_NS, T0 + 20 * MINUTE_NS)
        totals = visible.grouped_counts(group_of, points, True)
    assert totals[(0, "")] == _expected([0, 1, 2], points)
    assert totals[(1, "")] == _expected([3], points)


@pytest.mark.parametrize("points", [
    # an instant query's window, both edges inside a minute that holds lines
    [T0 + 2 * MINUTE_NS + 20 * NS, T0 + 7 * MINUTE_NS + 40 * NS],
    # and one whose start is before every line, its end inside the last minute
    [T0 - 3 * MINUTE_NS, T0 + 9 * MINUTE_NS + 40 * NS],
])
def test_window_edges_inside_a_minute_count_the_lines_there(reader, points):
    visible, sid_of = reader
    inner = visible.inner
    with inner.snapshot():
        totals = inner.window_counts(list(sid_of.values()), points, True)
    for k, sid in sid_of.items():
        got = [0] * (len(points) - 1)
        for (s, _), (lines, _) in totals.items():
            if s == sid:
                got = [a + b for a, b in zip(got, lines)]
        want = [sum(1 for ts, _, _, _ in STREAMS[k] if points[i] < ts <= points[i + 1])
                for i in range(len(points) - 1)]
        assert got == want, k
