"""A rare needle over thousands of streams with their lines in the head: the one pass that
finds and counts the head's rows is split in two halves of the streams, the second on a
second reader connection on a thread of its own (issue 22), and the answer is the one pass's.
That connection reads its own snapshot: its half is used only when the snapshot holds the
reader's head (a seal in between moves rows out of it), and a push after the reader's
snapshot is not counted."""

from __future__ import annotations

import os
import sqlite3

import pytest

from config import LimitsConfig
from logql import parse_expr
from logql.engine.logs import evaluate_log_query
from logql.engine.results import QueryStats
from services.ingest.prepare import Preparer, RawStream
from services.read.visibility import VisibleReader
from storage import scan, second_reader
from storage.db import connect, migrate
from storage.entries import append
from storage.stream_ids import StreamIds
from storage.reader import LogReader
from tests.helpers import seal

T = 1_700_000_000 * 10**9
MIN = 60 * 10**9
STREAMS = scan.SPLIT_STREAMS + 400
NEEDLE = '{env="prod"} |= "pod=7 "'


def _push(conn: sqlite3.Connection, pods: range, minutes: range, tag: str = "") -> None:
    raw = [RawStream([("env", "prod"), ("pod", f"pod-{i}")],
                     [(T + m * MIN + i, f"level=info pod={i} minute={m}{tag}", None)
                      for m in minutes]) for i in pods]
    prepared, outcome = Preparer().prepare(raw, T + 3 * 60 * MIN,
                                           LimitsConfig(reject_old_samples=False))
    assert not outcome.errors
    conn.execute("BEGIN")
    append(conn, StreamIds(), "t", prepared)
    conn.execute("COMMIT")


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "logstore.db")
    writer = connect(path)
    migrate(writer)
    _push(writer, range(STREAMS), range(0, 40, 20))
    _push(writer, range(7, 8), range(1, 40, 4))  # the needle's pod logs more often
    # the state the tests name: every line in the head, no block, more streams than a split
    assert writer.execute("SELECT count(DISTINCT stream_id) FROM entries").fetchone()[0] \
        == STREAMS >= scan.SPLIT_STREAMS
    assert writer.execute("SELECT count(*) FROM blocks").fetchone()[0] == 0
    yield path, writer
    writer.close()


def _needle(conn: sqlite3.Connection) -> tuple[list[str], tuple[int, int]]:
    """The needle's lines, newest first, and the (lines, bytes) the stats say it read."""
    stats = QueryStats()
    result = evaluate_log_query(VisibleReader(LogReader(conn)), "t", parse_expr(NEEDLE),
                                T - MIN, T + 60 * MIN, limit=100, backward=True, stats=stats)
    return ([v[1] for s in result for v in s["values"]],
            (stats.lines_scanned, stats.bytes_scanned))


def _expected(writer: sqlite3.Connection) -> tuple[list[str], tuple[int, int]]:
    lines = [line for (line,) in writer.execute(
        "SELECT line FROM entries WHERE instr(line, 'pod=7 ') ORDER BY ts DESC")]
    n, size = writer.execute(
        "SELECT count(*), sum(length(CAST(line AS BLOB))) FROM entries").fetchone()
    return lines, (n, size)


def _helper(path: str) -> second_reader.SecondReader:
    conn = connect(path, readonly=True)
    try:
        found = second_reader.second_reader(conn)
    finally:
        conn.close()
    assert found is not None
    return found


def test_the_second_half_of_the_streams_is_tallied_on_the_second_reader(db):
    path, writer = db
    expected = _expected(writer)
    assert len(expected[0]) == 12
    helper = _helper(path)
    conn = connect(path, readonly=True)
    before = helper.statements
    assert _needle(conn) == expected
    assert helper.statements == before + 1


def test_a_seal_between_the_two_snapshots_keeps_the_second_reader_out(db):
    """The pods of the second half are sealed after the reader's snapshot began: its head
    still holds their rows and its blocks do not, so the second reader, whose snapshot
    lacks those rows, must not tally them."""
    path, writer = db
    expected = _expected(writer)
    helper = _helper(path)
    conn = connect(path, readonly=True)
    reader = LogReader(conn)
    with reader.snapshot():
        assert conn.execute("SELECT count(*) FROM blocks").fetchone()[0] == 0
        moved = seal(writer, keep=lambda g: g.stream_id > STREAMS // 2 + 10)
        # the state: the rows left the head in the file, and not in the reader's snapshot
        assert moved > 0
        assert writer.execute("SELECT count(*) FROM entries").fetchone()[0] \
            == expected[1][0] - moved
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == expected[1][0]
        before = helper.statements
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        assert _needle(conn) == expected
        # both halves tallied by the reader itself
        assert helper.statements == before
        assert sum("group_concat(CASE WHEN" in s for s in statements) == 2


def test_a_push_after_the_readers_snapshot_is_not_counted_by_the_second_reader(db):
    path, writer = db
    expected = _expected(writer)
    helper = _helper(path)
    conn = connect(path, readonly=True)
    with LogReader(conn).snapshot():
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == expected[1][0]
        _push(writer, range(STREAMS - 100, STREAMS), range(30, 31), tag=" pod=7 late")
        assert writer.execute("SELECT count(*) FROM entries").fetchone()[0] \
            == expected[1][0] + 100
        before = helper.statements
        assert _needle(conn) == expected
        assert helper.statements == before + 1


def test_another_database_at_the_same_path_is_read_as_itself(tmp_path):
    """The second reader keeps its connection: when the file at its path is another
    database (removed and made anew), it opens that one."""
    path = str(tmp_path / "logstore.db")
    writer = connect(path)
    migrate(writer)
    _push(writer, range(STREAMS), range(0, 40, 20))
    _push(writer, range(7, 8), range(1, 40, 4))
    conn = connect(path, readonly=True)
    first = _expected(writer)
    assert _needle(conn) == first
    helper = _helper(path)
    conn.close()
    writer.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    writer = connect(path)
    migrate(writer)
    _push(writer, range(STREAMS), range(0, 40, 10))
    second = _expected(writer)
    assert second != first and len(second[0]) == 4
    conn = connect(path, readonly=True)
    before = helper.statements
    assert _needle(conn) == second
    assert helper.statements == before + 1
    assert _helper(path) is helper
    writer.close()
