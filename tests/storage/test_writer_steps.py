"""A push's append runs a number of SQLite statements that does not grow with its streams
(storage/inserts.py: each step of a statement gives up the GIL and waits to get it back), and
what it stores is the same: every row once and in order, a stream's time range widened once
however often the push names it, and a pack's repeats of `entries` rows looked up for each
stream on its own."""

from __future__ import annotations

import sqlite3

from config import LimitsConfig
from services.ingest.prepare import Preparer, RawStream
from storage.db import connect, migrate
from storage.entries import PACK_MIN_ROWS, append
from storage.stream_ids import StreamIds
from storage.inserts import ROWS_PER_STATEMENT, execute_values
from storage import sqlbatch
from storage.streams import stream_range_statements
from tests.helpers import head_rows

T = 1_700_000_000 * 10**9
LIMITS = LimitsConfig(reject_old_samples=False)


def _db(tmp_path) -> sqlite3.Connection:
    conn = connect(str(tmp_path / "x.db"))
    migrate(conn)
    return conn


def _counting(conn: sqlite3.Connection) -> list[str]:
    """Every statement SQLite starts from here on (an `executemany` starts one per row)."""
    started: list[str] = []
    conn.set_trace_callback(started.append)
    return started


def test_rows_go_in_once_and_in_order_in_few_statements(tmp_path):
    conn = _db(tmp_path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k INTEGER, v TEXT)")
    sql = "INSERT INTO t (id, k, v) VALUES {values}"
    next_id = 1
    for n in (0, 1, 2, 7, ROWS_PER_STATEMENT - 1, ROWS_PER_STATEMENT, ROWS_PER_STATEMENT + 1,
              1000):
        rows = [(next_id + i, i % 7, f"row {i} ✓") for i in range(n)]
        started = _counting(conn)
        execute_values(conn, sql, 3, rows)
        conn.set_trace_callback(None)
        # full statements, then one per set bit of the rest (64, 32, ... 1 rows)
        want = n // ROWS_PER_STATEMENT + bin(n % ROWS_PER_STATEMENT).count("1")
        assert len(started) == want, n
        assert conn.execute("SELECT id, k, v FROM t WHERE id >= ? ORDER BY id",
                            (next_id,)).fetchall() == rows
        next_id += n
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == next_id - 1


def test_an_upsert_of_one_key_twice_in_a_statement_adds_both(tmp_path):
    conn = _db(tmp_path)
    conn.execute("CREATE TABLE c (k INTEGER PRIMARY KEY, n INTEGER)")
    execute_values(conn, "INSERT INTO c (k, n) VALUES {values} "
                   "ON CONFLICT (k) DO UPDATE SET n = n + excluded.n", 2,
                   [(1, 1), (2, 10), (1, 100), (1, 1000)])
    assert conn.execute("SELECT k, n FROM c ORDER BY k").fetchall() == [(1, 1101), (2, 10)]


def test_a_stream_named_twice_is_widened_to_both_ranges(tmp_path):
    conn = _db(tmp_path)
    conn.executemany("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, last_ts) "
                     "VALUES (?, 't', ?, 0, ?, ?)", [(1, "{a=\"1\"}", 50, 60),
                                                     (2, "{a=\"2\"}", 50, 60)])
    sqlbatch.run(conn, stream_range_statements([(40, 55, 1), (55, 70, 1), (52, 58, 2)]))
    assert conn.execute("SELECT id, first_ts, last_ts FROM streams ORDER BY id").fetchall() \
        == [(1, 40, 70), (2, 50, 60)]


def _push(conn, cache, raw: list[RawStream]):
    prepared, outcome = Preparer().prepare(raw, T + 3600 * 10**9, LIMITS)
    assert not outcome.errors
    conn.execute("BEGIN")
    started = _counting(conn)
    result = append(conn, cache, "t", prepared)
    conn.set_trace_callback(None)
    conn.execute("COMMIT")
    return result, started


def _streams(count: int, lines: int, offset: int) -> list[RawStream]:
    return [RawStream([("pod", f"p{s}")],
                      [(T + (offset + i) * 10**6, f"pod {s} line {offset + i}",
                        {"trace_id": f"t{i % 3}"} if i % 2 else None) for i in range(lines)])
            for s in range(count)]


def test_a_push_to_more_streams_runs_no_more_statements(tmp_path):
    """Streams already stored, each given a pack: 8x the streams, about the same statements
    (every step of an `executemany` is one: it was 200 for 30 streams)."""
    counts = {}
    for count in (30, 240):
        (tmp_path / str(count)).mkdir()
        conn = _db(tmp_path / str(count))
        cache = StreamIds()
        _push(conn, cache, _streams(count, PACK_MIN_ROWS, 0))
        result, started = _push(conn, cache, _streams(count, PACK_MIN_ROWS + 8, 10_000))
        assert result.inserted == count * (PACK_MIN_ROWS + 8)
        assert conn.execute("SELECT count(*) FROM blocks WHERE flags & 4").fetchone()[0] \
            == 2 * count
        assert head_rows(conn) == count * (2 * PACK_MIN_ROWS + 8)
        # metadata split the rollups: a stream's tallies are several rows
        assert conn.execute("SELECT count(*) FROM rollups").fetchone()[0] > 2 * count
        counts[count] = len(started)
    assert counts[30] <= 20, counts
    assert counts[240] <= counts[30] + 6, counts


def test_a_packs_repeats_of_rows_are_found_stream_by_stream(tmp_path):
    """Stream a's few lines are `entries` rows; its next push repeats them among many. Stream
    b's push brings lines with a's timestamps and text: not repeats, as they are b's."""
    conn = _db(tmp_path)
    cache = StreamIds()
    few = [(T + i, f"line {i}", None) for i in range(3)]
    _push(conn, cache, [RawStream([("app", "a")], few), RawStream([("app", "b")], [few[0]])])
    many = [(T + 100 + i, f"more {i}", None) for i in range(PACK_MIN_ROWS)]
    result, _ = _push(conn, cache, [RawStream([("app", "a")], few + many),
                                    RawStream([("app", "b")], few + many)])
    # a: its three rows repeated; b: its one row repeated, a's other two are new to b
    assert (result.inserted, result.duplicates) == (
        PACK_MIN_ROWS + PACK_MIN_ROWS + 2, 3 + 1)
    ids = dict(conn.execute("SELECT value, stream_id FROM stream_labels WHERE name = 'app'"))
    per_stream = dict(conn.execute("SELECT stream_id, sum(lines) FROM rollups GROUP BY 1"))
    assert per_stream == {ids["a"]: 3 + PACK_MIN_ROWS, ids["b"]: 3 + PACK_MIN_ROWS}
