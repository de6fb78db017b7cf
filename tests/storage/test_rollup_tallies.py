"""The rollups a push adds from the totals it tallied while it was validated
(storage/entries.py `tally`, `ADD_TALLIES`) are those counted from the rows stored: per
stream, minute (floored, also before 1970) and metadata text, lines and UTF-8 bytes, for
packs and `entries` rows alike. A push with a row that was not stored (a repeat of a stored
line) adds only what it stored."""

from __future__ import annotations

import time
from collections import defaultdict

from config import LimitsConfig
from logql.model import MINUTE_NS
from services.ingest.prepare import Preparer, RawStream
from storage.db import connect, migrate
from storage.deletes import block_rows
from storage.entries import append
from storage.stream_ids import StreamIds

NS = 10**9
BASE = time.time_ns() - 600 * NS
ROLLUPS = "SELECT stream_id, minute, metadata, lines, bytes FROM rollups ORDER BY 1, 2, 3"


def _raw(seed: int) -> list[RawStream]:
    before_1970 = -5 * MINUTE_NS - 7
    entries = [(before_1970 + i * 17 * NS + seed, f"level=warn n={i} ünïcode ✓", None)
               for i in range(40)]
    mixed = [(BASE + i * 9 * NS + seed,
              f"line {i} ERROR" if i % 3 else '{"level":"debug","i":%d}' % i,
              {"trace.id": f"t{i % 4}"} if i % 5 == 0 else None)
             for i in range(80)]
    return [RawStream([("app", "old")], entries), RawStream([("app", "new")], mixed)]


def _recount(conn) -> list[tuple]:
    """The rollups' rows as counted from every stored row (the head's packs and rows)."""
    totals: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    rows = conn.execute("SELECT stream_id, ts, line, metadata FROM entries").fetchall()
    for block_id, sid in conn.execute("SELECT id, stream_id FROM blocks").fetchall():
        rows += [(sid, ts, line, md) for _, ts, line, md in block_rows(conn, block_id)]
    for sid, ts, line, md in rows:
        t = totals[(sid, ts - ts % MINUTE_NS, md or "")]
        t[0] += 1
        t[1] += len(line.encode("utf-8"))
    return sorted((*key, n, size) for key, (n, size) in totals.items())


def _push(conn, cache, prepared):
    conn.execute("BEGIN")
    result = append(conn, cache, "t", prepared)
    conn.execute("COMMIT")
    return result


def test_tallied_rollups_are_what_the_stored_rows_count(tmp_path):
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    preparer, cache = Preparer(), StreamIds()
    lim = LimitsConfig(reject_old_samples=False)
    for seed in (0, 1):
        prepared, outcome = preparer.prepare(_raw(seed), time.time_ns(), lim)
        assert not outcome.errors and all(ps.tallies for ps in prepared)
        assert _push(conn, cache, prepared).inserted == 120
    rollups = conn.execute(ROLLUPS).fetchall()
    assert rollups == _recount(conn)
    assert any(minute < 0 for _, minute, *_ in rollups)
    assert any('"trace_id"' in md for _, _, md, *_ in rollups)
    # repeats of stored lines beside one new line: only the new line is counted
    prepared, _ = preparer.prepare(_raw(1) + [RawStream([("app", "new")], [(1, "x", None)])],
                                   time.time_ns(), lim)
    result = _push(conn, cache, prepared)
    assert (result.inserted, result.duplicates) == (1, 120)
    assert conn.execute(ROLLUPS).fetchall() == _recount(conn)
    assert conn.execute("SELECT sum(lines) FROM rollups").fetchone()[0] == 2 * 120 + 1
    # a few lines a stream are `entries` rows: tallied, and when the table's unique key
    # leaves repeats out, counted by SQLite from what it inserted
    few = [RawStream([("app", "few")], [(BASE + i * NS, f"few {i} é", None) for i in range(5)])]
    prepared, _ = preparer.prepare(few, time.time_ns(), lim)
    assert _push(conn, cache, prepared).inserted == 5
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 6  # the state
    assert conn.execute(ROLLUPS).fetchall() == _recount(conn)
    few[0].entries.append((BASE + 99 * NS, "one more", None))
    prepared, _ = preparer.prepare(few, time.time_ns(), lim)
    result = _push(conn, cache, prepared)
    assert (result.inserted, result.duplicates) == (1, 5)
    assert conn.execute(ROLLUPS).fetchall() == _recount(conn)
    assert conn.execute("SELECT sum(lines) FROM rollups").fetchone()[0] == 2 * 120 + 1 + 6


def test_many_few_line_streams_go_in_as_statements_of_many_rows(tmp_path):
    """A push of many streams of a few lines each: `entries` rows, inserted 128 to a
    statement (storage/inserts.py) with the rest after them. Every row goes in once, in
    arrival order, and a repeat of a stored line in the middle of the push is left out and
    not counted."""
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    preparer, cache = Preparer(), StreamIds()
    lim = LimitsConfig(reject_old_samples=False)

    def streams(lines: int) -> list[RawStream]:
        return [RawStream([("pod", f"p{s}")], [(BASE + (s * 7 + i) * NS, f"pod {s} line {i}",
                                                None) for i in range(lines)])
                for s in range(70)]

    prepared, _ = preparer.prepare(streams(3), time.time_ns(), lim)
    assert sum(len(ps.rows) for ps in prepared) == 210  # statements of 128, 64, 16, 2
    assert _push(conn, cache, prepared).inserted == 210
    stored_rows = conn.execute("SELECT line FROM entries ORDER BY id").fetchall()
    assert [line for (line,) in stored_rows] == [
        f"pod {s} line {i}" for s in range(70) for i in range(3)]
    assert conn.execute(ROLLUPS).fetchall() == _recount(conn)
    # the same streams again with a fourth line each: the first three repeat stored lines
    prepared, _ = preparer.prepare(streams(4), time.time_ns(), lim)
    result = _push(conn, cache, prepared)
    assert (result.inserted, result.duplicates) == (70, 210)
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 280
    assert conn.execute(ROLLUPS).fetchall() == _recount(conn)
    assert conn.execute("SELECT sum(lines) FROM rollups").fetchone()[0] == 280
