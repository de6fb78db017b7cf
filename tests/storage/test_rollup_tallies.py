"""The rollups a push adds from the totals it tallied while it was validated
(storage/entries.py `tally`, `ADD_TALLIES`) are those SQLite counts from the inserted rows:
per stream, minute (floored, also before 1970) and metadata text, lines and UTF-8 bytes.
A push with a row that was not inserted (a duplicate) has SQLite count instead. Which way a
push took is read from the statements traced."""

from __future__ import annotations

import time

from config import LimitsConfig
from logql.model import MINUTE_NS
from services.ingest.prepare import Preparer, RawStream
from storage.db import connect, migrate
from storage.entries import append

NS = 10**9
RECOUNT = ("SELECT stream_id, ts - ((ts % ?1) + ?1) % ?1, coalesce(metadata, ''), count(*), "
           "sum(length(CAST(line AS BLOB))) FROM entries GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
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


def _tallied(statements: list[str]) -> bool:
    return any(s.startswith("INSERT INTO rollups") and " VALUES (" in s for s in statements)


def _recounted(statements: list[str]) -> bool:
    return any(s.startswith("INSERT INTO rollups") and " FROM entries " in s
               for s in statements)


def _push(conn, cache, prepared) -> list[str]:
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    conn.execute("BEGIN")
    append(conn, cache, "t", prepared)
    conn.execute("COMMIT")
    conn.set_trace_callback(None)
    return statements


def test_tallied_rollups_are_what_sqlite_counts(tmp_path):
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    preparer, cache = Preparer(), {}
    lim = LimitsConfig(reject_old_samples=False)
    for seed in (0, 1):
        prepared, outcome = preparer.prepare(_raw(seed), time.time_ns(), lim)
        assert not outcome.errors and all(ps.tallies for ps in prepared)
        statements = _push(conn, cache, prepared)
        assert _tallied(statements) and not _recounted(statements)
    rollups = conn.execute(ROLLUPS).fetchall()
    assert rollups == conn.execute(RECOUNT, (MINUTE_NS,)).fetchall()
    assert any(minute < 0 for _, minute, *_ in rollups)
    assert any('"trace_id"' in md for _, _, md, *_ in rollups)
    # a repeat of a line already stored: SQLite counts what it inserted
    prepared, _ = preparer.prepare(_raw(1) + [RawStream([("app", "new")], [(1, "x", None)])],
                                   time.time_ns(), lim)
    statements = _push(conn, cache, prepared)
    assert _recounted(statements) and not _tallied(statements)
    assert conn.execute(ROLLUPS).fetchall() == conn.execute(RECOUNT, (MINUTE_NS,)).fetchall()
    assert conn.execute("SELECT sum(lines) FROM rollups").fetchone()[0] == 2 * 120 + 1
