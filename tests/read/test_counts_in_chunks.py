"""Counts over more streams than one rollup statement takes (storage/rollups.py reads them a
chunk of CHUNK_STREAMS at a time, so that SQLite's sort stays in memory) are the exact
totals, per stream and summed per group, whichever statement the points choose."""

from __future__ import annotations

import pytest

from logql.model import MINUTE_NS, canonical_labels
from storage import rollups
from storage.db import connect, migrate
from storage.entries import PreparedStream, append
from storage.stream_ids import StreamIds
from storage.reader import LogReader

NS = 10**9
T0 = 1_700_000_000 * NS - (1_700_000_000 * NS) % MINUTE_NS   # a whole minute
STREAMS = 2 * rollups.CHUNK_STREAMS + 100
GROUPS = 7


def _rows(k: int) -> list[tuple[int, int, str, str | None]]:
    """Three lines in minutes that differ from stream to stream, one with metadata."""
    out = []
    for i in range(3):
        ts = T0 + ((k + 4 * i) % 11) * MINUTE_NS + (k % 50) * NS + i
        md = '{"trace":"t%d"}' % (k % 2) if i == 1 else None
        out.append((ts, i, f"s{k} line {i}" + "x" * (k % 5), md))
    out.sort()
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    conn = connect(str(tmp_path_factory.mktemp("chunks") / "logstore.db"))
    migrate(conn)
    rows = {k: _rows(k) for k in range(STREAMS)}
    prepared = []
    for k, rs in rows.items():
        labels = {"app": f"a{k % GROUPS}", "k": str(k)}
        prepared.append(PreparedStream(labels, canonical_labels(labels), rs,
                                       rs[0][0], rs[-1][0]))
    # one transaction, as the writer's group commit does: row by row in autocommit each
    # insert was its own synced commit (21 s for the 12,300 rows)
    conn.execute("BEGIN")
    append(conn, StreamIds(), "t", prepared)
    conn.execute("COMMIT")
    by_text = dict(conn.execute("SELECT labels, id FROM streams"))
    sid_of = {k: by_text[canonical_labels({"app": f"a{k % GROUPS}", "k": str(k)})]
              for k in rows}
    yield LogReader(conn), rows, sid_of
    conn.close()


def _expected(rows, sid_of, points, group=None):
    """(key, metadata) -> (lines, bytes) per bucket (points[i], points[i+1]]."""
    nb = len(points) - 1
    out: dict = {}
    for k, rs in rows.items():
        for ts, _, line, md in rs:
            for i in range(nb):
                if points[i] < ts <= points[i + 1]:
                    key = (sid_of[k], md or "") if group is None else (group[sid_of[k]], "")
                    lines, sizes = out.setdefault(key, ([0] * nb, [0] * nb))
                    lines[i] += 1
                    sizes[i] += len(line.encode())
    return out


def _nonzero(totals):
    return {key: (list(lines), list(sizes)) for key, (lines, sizes) in totals.items()
            if any(lines)}


POINTS = {
    # each point a minute less 1 ns: the rollups' own minutes (rollup_totals, a span)
    "minutes": [T0 - 1 + m * MINUTE_NS for m in (0, 2, 5, 8, 12)],
    # minutes of uneven widths (rollup_totals by a range table)
    "uneven minutes": [T0 - 1 + m * MINUTE_NS for m in (0, 1, 3, 8, 12)],
    # an even grid of whole minutes (rollup_grid, edges moved)
    "grid": [T0 + m * 3 * MINUTE_NS for m in range(5)],
    # edges inside minutes (rollup_totals by ranges, partial minutes from the lines)
    "edges": [T0 + 17 * NS, T0 + 3 * MINUTE_NS + 40 * NS, T0 + 11 * MINUTE_NS + 1],
}


@pytest.mark.parametrize("shape", POINTS)
def test_per_stream_counts_over_many_chunks(store, shape):
    reader, rows, sid_of = store
    assert STREAMS > 2 * rollups.CHUNK_STREAMS  # three chunks at least
    points = POINTS[shape]
    got = reader.window_counts(sorted(sid_of.values()), points, True)
    assert _nonzero(got) == _expected(rows, sid_of, points)


@pytest.mark.parametrize("shape", ["minutes", "uneven minutes", "grid"])
def test_group_sums_add_up_across_chunks(store, shape):
    """Every group has streams in every chunk: the chunks' sums are added, not replaced."""
    reader, rows, sid_of = store
    group = {sid: k % GROUPS for k, sid in sid_of.items()}
    points = POINTS[shape]
    got = reader.grouped_counts(group, points, True)
    assert _nonzero(got) == _expected(rows, sid_of, points, group)
    # and each stream its own group (index/stats' shape), over several ranges
    own = {sid: sid for sid in sid_of.values()}
    got = reader.grouped_counts(own, points, True)
    expected = {(sid, ""): v for (sid, _), v in _expected(rows, sid_of, points, own).items()}
    assert _nonzero(got) == expected
