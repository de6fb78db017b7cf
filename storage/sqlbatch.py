"""A writer's statements run in one call (storage/_sqlbatch.c, issue 25).

The sqlite3 module gives up the GIL around every step of a statement, and each return waits
for it while the event loop or another thread runs Python: with one busy thread beside it, a
realistic push's append took 10.6 ms instead of 3.3 (bench/REPORT.md). `run` hands a list of
statements to C, which binds them all, then runs them with the GIL released once.

A connection takes part once `attach`ed (the writer's, storage/db.py), and only where the C
module built and drives the very handle the sqlite3 module opened (the same library, the
same file): otherwise `run` executes the statements one by one, with the same effect.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import Sequence

try:
    from storage import _sqlbatch
except ImportError:  # pragma: no cover - no C compiler, or a sqlite3 module linked statically
    _sqlbatch = None

log = logging.getLogger("logstore.sqlbatch")

Statement = tuple[str, Sequence]

# id(connection) -> (the connection, its prepared statements)
_attached: dict[int, tuple[sqlite3.Connection, dict]] = {}


def attach(conn: sqlite3.Connection) -> bool:
    """Run `conn`'s statement lists in C from now on; False where that cannot be done."""
    if _sqlbatch is None:
        return False
    main = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"),
                None)
    try:
        same = bool(main) and os.path.samefile(_sqlbatch.filename(conn), main)
    except OSError:
        same = False
    if not same:
        log.warning("statement lists run one by one: the C module does not see this "
                    "connection's file")
        return False
    _attached[id(conn)] = (conn, {})
    return True


def detach(conn: sqlite3.Connection) -> None:
    """Before `conn` closes: its prepared statements are finalized."""
    got = _attached.pop(id(conn), None)
    if got is not None:
        got[1].clear()


def run(conn: sqlite3.Connection, statements: Sequence[Statement]) -> list[int]:
    """Each (sql, parameters) run in order; the rows each changed. An error stops the list
    there and raises as `execute` would."""
    if not statements:
        return []
    got = _attached.get(id(conn))
    if got is not None and got[0] is conn:
        return _sqlbatch.run(conn, got[1], statements)
    return [conn.execute(sql, params).rowcount for sql, params in statements]
