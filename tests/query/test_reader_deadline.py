"""The storage boundary's deadline stops a statement that is already running: SQLite's
progress handler interrupts it and the read ends with QueryTimeout, not a partial answer."""

from __future__ import annotations

import time

import pytest

from logql.errors import QueryTimeout
from storage.db import connect, migrate
from storage.reader import LogReader

NS = 10**9


@pytest.fixture
def conn(tmp_path):
    conn = connect(str(tmp_path / "logstore.db"))
    migrate(conn)
    conn.execute("BEGIN")  # one commit, not one synced commit per row
    conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, last_ts) "
                 "VALUES (1, 'fake', '{app=\"a\"}', 1, 0, 1)")
    conn.executemany("INSERT INTO entries (stream_id, ts, hash, line) VALUES (1, ?, ?, ?)",
                     ((i * 1000, i, f"line {i}") for i in range(60_000)))
    conn.execute("COMMIT")
    yield conn
    conn.close()


# window edges that are not minute-aligned: every entry is counted by SQL, in one statement
POINTS = [7 * i * NS // 3 for i in range(40)]


def test_a_running_statement_is_interrupted_at_the_deadline(conn):
    reader = LogReader(conn, deadline=time.monotonic() - 1)  # already past
    with pytest.raises(QueryTimeout):
        with reader.snapshot():
            reader.window_counts([1], POINTS, want_bytes=True)
    assert not conn.in_transaction


def test_without_a_deadline_the_same_read_answers(conn):
    reader = LogReader(conn)
    with reader.snapshot():
        totals = reader.window_counts([1], POINTS, want_bytes=True)
    lines = sum(sum(t[0]) for t in totals.values())
    assert lines == sum(1 for i in range(60_000) if 0 < i * 1000 <= POINTS[-1])
