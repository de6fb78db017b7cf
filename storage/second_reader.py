"""A second reader connection on a thread of its own: half of a broad head statement on the
second core.

SQLite gives up the GIL while it steps a statement, and an aggregate over the head (the rare
needle's tally: every row of thousands of streams, one row out) is one step. So while the
reader's own connection runs the statement over half of the streams, this connection runs it
over the other half, and the two cores share the read (issue 22: 20,000 pods with most of
the hour in the head, the tally was about half of the needle's time).

The two connections read two snapshots, and the second half is taken only when they agree
on the head: the statement is bounded by the highest entry id of the reader's snapshot (a
push after it is left out), and `seal_state.seals`, which every seal raises, must be the
same in both (a seal in between moved rows from the head into a block the reader's snapshot
does not have: they would be missed). Otherwise, or when this connection is busy with
another read, the reader runs the second half itself. Rows the compactor deleted in between
are missing from the second half, as they are from any later read.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, TypeVar

from storage.db import connect, under_deadline

T = TypeVar("T")


class SecondReader:
    """One read-only connection to a database file and the thread that uses it."""

    def __init__(self, path: str):
        self.path = path
        self.pid = os.getpid()
        self._conn: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="second-reader")
        self._busy = threading.Lock()
        self.statements = 0  # reads that ran here (what the tests look at)

    def submit(self, fn: Callable[[sqlite3.Connection], T], head: tuple[int, int],
               deadline: float | None) -> "Future[T | None] | None":
        """`fn(conn)` on this thread, inside a read transaction whose `seal_state` (seals,
        lineage) is `head`, as the reader's; the future's result is None when it is not.
        None when another read has this connection."""
        if not self._busy.acquire(blocking=False):
            return None
        try:
            return self._thread.submit(self._run, fn, head, deadline)
        except BaseException:
            self._busy.release()
            raise

    def close(self) -> None:
        """Close the connection on its thread, then end the thread."""
        def shut() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        self._thread.submit(shut)
        self._thread.shutdown(wait=False)

    def _begin(self) -> tuple[sqlite3.Connection, tuple[int, int]]:
        if self._conn is None:
            self._conn = connect(self.path, readonly=True)
        conn = self._conn
        conn.execute("BEGIN")
        return conn, head_state(conn)

    def _run(self, fn: Callable[[sqlite3.Connection], T], head: tuple[int, int],
             deadline: float | None) -> T | None:
        try:
            conn, state = self._begin()
            if state[1] != head[1]:
                # another database at this path (a file replaced): open it
                conn.execute("COMMIT")
                conn.close()
                self._conn = None
                conn, state = self._begin()
            past = None if deadline is None else (lambda: time.monotonic() > deadline)
            with under_deadline(conn, past):
                if tuple(state) != tuple(head):
                    return None
                self.statements += 1
                return fn(conn)
        finally:
            self._busy.release()


_HEAD_STATE = "SELECT seals, lineage FROM seal_state WHERE id = 1"
# files with a second reader at once in one process (a server has one; the tests' many
# files would each keep a thread and a connection)
_MAX_READERS = 4
_readers: dict[str, SecondReader] = {}
_lock = threading.Lock()


def head_state(conn: sqlite3.Connection) -> tuple[int, int]:
    """(seals, lineage) of `conn`'s snapshot, what `SecondReader.submit` compares."""
    return conn.execute(_HEAD_STATE).fetchone()


def second_reader(conn: sqlite3.Connection) -> SecondReader | None:
    """The second reader of `conn`'s database file (made at first use, one per file and
    process), None for a database that is not a file."""
    path = next((f for _, name, f in conn.execute("PRAGMA database_list") if name == "main"),
                "")
    if not path:
        return None
    with _lock:
        reader = _readers.get(path)
        if reader is None or reader.pid != os.getpid():
            reader = _readers[path] = SecondReader(path)
            while len(_readers) > _MAX_READERS:
                oldest = next(iter(_readers))
                _readers.pop(oldest).close()
        return reader
