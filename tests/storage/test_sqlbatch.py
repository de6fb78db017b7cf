"""A writer's statement lists run in C with the GIL given up once (storage/_sqlbatch.c) do
what running them one by one with `execute` does: the same rows, the same counts of changed
rows, the same exceptions, the statements before a failing one kept. The writer of a real
database runs them so (Database attaches its connection)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from storage import sqlbatch
from storage.db import Database
from tests.conftest import needs

pytestmark = needs(sqlbatch._sqlbatch is not None, "storage/_sqlbatch.c not built")

STATEMENTS = [
    ("INSERT INTO t (a, b, c) VALUES (?, ?, ?), (?, ?, ?)",
     [1, "one", b"\x00\x01", 2, "zwei ✓", None]),
    ("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", (3, 2.5, b"")),
    ("UPDATE t SET b = b || ? WHERE a >= ?", ("!", 2)),
    ("INSERT INTO t (a, b, c) SELECT a + 10, b, c FROM t WHERE a < ?", (3,)),
    ("DELETE FROM t WHERE a = ?", (1,)),
]


def fresh(path, attach: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b, c)")
    assert sqlbatch.attach(conn) is True if attach else True
    return conn


def test_a_list_runs_as_execute_runs_it(tmp_path):
    native = fresh(str(tmp_path / "native.db"), attach=True)
    plain = fresh(str(tmp_path / "plain.db"), attach=False)
    assert id(native) in sqlbatch._attached and id(plain) not in sqlbatch._attached
    assert sqlbatch.run(native, STATEMENTS) == sqlbatch.run(plain, STATEMENTS) == [2, 1, 2, 2, 1]
    assert native.execute("SELECT * FROM t ORDER BY a").fetchall() == \
        plain.execute("SELECT * FROM t ORDER BY a").fetchall() == [
            (2, "zwei ✓!", None), (3, "2.5!", b""), (11, "one", b"\x00\x01"),
            (12, "zwei ✓!", None)]
    # again: the prepared statement is kept and bound anew
    assert sqlbatch.run(native, [("UPDATE t SET b = b || ? WHERE a >= ?", ("?", 12))]) == [1]
    assert native.execute("SELECT b FROM t WHERE a = 12").fetchone()[0] == "zwei ✓!?"
    sqlbatch.detach(native)
    native.close()
    plain.close()


@pytest.mark.parametrize("attach", [True, False])
def test_an_error_stops_the_list_there_as_execute_would(tmp_path, attach):
    conn = fresh(str(tmp_path / "t.db"), attach)
    conn.execute("BEGIN")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE constraint failed: t.a"):
        sqlbatch.run(conn, [("INSERT INTO t (a) VALUES (?)", (1,)),
                            ("INSERT INTO t (a) VALUES (?)", (1,)),
                            ("INSERT INTO t (a) VALUES (?)", (2,))])
    assert conn.in_transaction
    assert conn.execute("SELECT a FROM t").fetchall() == [(1,)]
    with pytest.raises(sqlite3.OperationalError, match="no such table: nope"):
        sqlbatch.run(conn, [("INSERT INTO nope VALUES (?)", (1,))])
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    sqlbatch.detach(conn)
    conn.close()


def test_parameters_of_another_kind_are_refused(tmp_path):
    conn = fresh(str(tmp_path / "t.db"), attach=True)
    with pytest.raises(ValueError, match="takes 3 parameters, given 2"):
        sqlbatch.run(conn, [("INSERT INTO t VALUES (?, ?, ?)", (1, 2))])
    with pytest.raises(TypeError, match="a parameter of type list"):
        sqlbatch.run(conn, [("INSERT INTO t VALUES (?, ?, ?)", (1, [2], 3))])
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    sqlbatch.detach(conn)
    conn.close()


def test_the_writer_of_a_database_runs_its_lists_in_c(tmp_path):
    db = Database(str(tmp_path / "data"))
    db.open()
    try:
        writer = db._writer_conn
        assert sqlbatch._attached[id(writer)][0] is writer
        ran_on: list[str] = []

        def work(conn):
            ran_on.append(threading.current_thread().name)
            return sqlbatch.run(conn, [
                ("UPDATE seal_state SET seals = seals + ? WHERE id = 1", (5,))])
        assert asyncio.run(db.write(work)) == [1]
        assert ran_on == ["logstore-writer"]
        assert sqlbatch._attached[id(writer)][1]  # a statement prepared and kept
    finally:
        db.close()
    assert id(writer) not in sqlbatch._attached
    again = sqlite3.connect(db.path)
    assert again.execute("SELECT seals FROM seal_state").fetchone()[0] == 5
    again.close()
