"""SQLite connections: one writer thread doing group commit, a pool of reader threads.

Every write goes through `Database.write(fn)`: the writer thread folds every piece of work
that is waiting into one transaction and commits once, so a hundred concurrent pushes cost one
fsync, and a caller's future resolves only after its work is durable. Reads run on a small
pool of threads, each with its own read-only connection (WAL lets them run beside the writer).

Plain sqlite3 in threads rather than aiosqlite: the query evaluator iterates cursors in
tight loops inside one thread; aiosqlite would cost an event-loop round trip per fetch.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import queue
import sqlite3
import struct
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from logql.errors import QueryTimeout
from storage import sqlbatch
from storage.dir_lock import DataDirLock
from storage.stream_ids import StreamIds

log = logging.getLogger("logstore.db")

T = TypeVar("T")
DB_FILENAME = "logstore.db"
# the WAL file keeps the size of its largest use until a checkpoint truncates it; past this
# size SQLite truncates it at each reset by itself (PRAGMA journal_size_limit)
WAL_SIZE_LIMIT = 64 << 20
BUSY_TIMEOUT_MS = 30000
# WAL frames (pages) the writer lets wait before it copies them into the database: SQLite's
# own automatic checkpoint, which the writer's connection has off
CHECKPOINT_PAGES = 1000
_U32 = struct.Struct("=I")


# SQLite VM steps between two deadline checks inside one reader's statement
PROGRESS_STEPS = 20_000


@contextmanager
def under_deadline(conn: sqlite3.Connection,
                   past_deadline: Callable[[], bool] | None) -> Iterator[None]:
    """The block's statements on a reader connection: one still running once
    `past_deadline()` says so is interrupted, and the block ends with QueryTimeout (none
    without a deadline). The read transaction still open at the end is closed."""
    if past_deadline is not None:
        conn.set_progress_handler(past_deadline, PROGRESS_STEPS)
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc) and past_deadline is not None and past_deadline():
            raise QueryTimeout() from None
        raise
    finally:
        conn.set_progress_handler(None, 0)
        if conn.in_transaction:
            conn.execute("COMMIT")


def connect(path: str, *, readonly: bool = False, synchronous: str = "full") -> sqlite3.Connection:
    fresh = not readonly and (not os.path.exists(path) or os.path.getsize(path) == 0)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    if fresh:
        # before anything writes the header: sealing frees the head's pages, and only a file
        # created with incremental auto-vacuum can give them back without a VACUUM
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if readonly:
        conn.execute("PRAGMA query_only = ON")
    else:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    # sorts and temporary b-trees larger than the page cache spill to a temporary file:
    # in memory, grouping a head of millions of rows took hundreds of megabytes
    conn.execute("PRAGMA temp_store = FILE")
    conn.execute("PRAGMA cache_size = -8192")  # 8 MiB per connection
    conn.execute("PRAGMA mmap_size = 0")
    return conn


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every file in migrations/, in order."""
    return migrations_in(importlib.resources.files("migrations"))


def migrations_in(folder: Any) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every `NNNN_name.sql` in a package folder, in order: the
    SQLite file's, ClickHouse's and the shared state's migrations alike."""
    found = []
    for res in folder.iterdir():
        name = res.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, res.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two migrations share a number: {[n for _, n, _ in found]}")
    return found


class DatabaseTooNew(Exception):
    """The database records migrations this logstore does not have: a newer one wrote it."""

    def __init__(self, path: str, unknown: list[str]):
        self.unknown = unknown
        super().__init__(
            f"the database {path} was migrated by a newer logstore: it records "
            f"{'migrations' if len(unknown) > 1 else 'migration'} {', '.join(unknown)}, which "
            f"this logstore does not know. Run a newer logstore on it, or restore a backup "
            f"made before the upgrade; the database was left unchanged")


def refuse_newer(conn: sqlite3.Connection) -> None:
    """Raise DatabaseTooNew when schema_version records a migration that is not in
    migrations/. It only reads: an older binary must not write into a newer schema (its
    queries may miss new columns' meaning, its writes skip what new triggers expect)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                    "AND name = 'schema_version'").fetchone() is None:
        return
    known = {version for version, _, _ in migration_files()}
    unknown = [name for version, name in conn.execute(
        "SELECT version, name FROM schema_version ORDER BY version") if version not in known]
    if unknown:
        path = conn.execute("PRAGMA database_list").fetchone()[2]
        raise DatabaseTooNew(path, unknown)


def check_not_newer(path: str) -> None:
    """refuse_newer() on the file at `path` (if there is one) through a read-only
    connection: `logstore serve` asks before it starts the server."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    conn = connect(path, readonly=True)
    try:
        refuse_newer(conn)
    finally:
        conn.close()


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded in schema_version; return the names applied.
    Raises DatabaseTooNew, before writing anything, for a database from a newer logstore."""
    refuse_newer(conn)
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version ("
                 "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    done = {row[0] for row in conn.execute("SELECT version FROM schema_version")}
    applied = []
    for version, name, sql in migration_files():
        if version in done:
            continue
        # executescript commits implicitly; wrap so a failing file leaves nothing behind
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split_sql(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                         (version, name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


def _split_sql(script: str) -> list[str]:
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current)
            current = ""
    if current.strip() and not all(l.strip().startswith("--") or not l.strip()
                                   for l in current.splitlines()):
        raise RuntimeError(f"incomplete SQL statement in migration: {current[:80]!r}")
    return statements


class DiskFull(Exception):
    """SQLite could not write: the disk (or `max_page_count`) is full. Nothing of the
    failed transaction was kept; writes resume once there is space."""


def _full(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, sqlite3.Error) and ("database or disk is full" in text
                                               or "disk I/O error" in text)


class _Work:
    __slots__ = ("fn", "future", "loop", "alone", "rerun")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any], future: Any, loop: Any,
                 alone: bool = False, rerun: bool = False):
        self.fn = fn
        self.future = future
        self.loop = loop
        self.alone = alone  # runs outside any transaction (a checkpoint cannot run inside)
        # whatever fn does besides SQLite may be done twice (a push's append: the writer's map
        # of stream ids is forgotten after a rollback)
        self.rerun = rerun


def _truncate_wal(conn: sqlite3.Connection, wait_ms: int) -> bool:
    """Copy the WAL into the database and cut the file to nothing, waiting at most
    `wait_ms` for readers of older snapshots; False when one still holds it."""
    conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return busy == 0


_STOP = object()


class Database:
    """The one SQLite file: a group-commit writer thread and a reader pool."""

    def __init__(self, data_dir: str, *, synchronous: str = "full", read_connections: int = 4):
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, DB_FILENAME)
        self.lock = DataDirLock(data_dir)
        self.synchronous = synchronous
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._writer_conn: sqlite3.Connection | None = None
        self._readers = ThreadPoolExecutor(max_workers=read_connections,
                                           thread_name_prefix="logstore-read")
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_lock = threading.Lock()
        self.writer_alive = False
        self.disk_full = False  # the last write failed for want of space (/ready says so)
        self.commits = 0
        # every stream's id, owned by the writer thread; forgotten when a transaction or a
        # caller's savepoint rolls back, because it may name streams that no longer exist
        self.stream_ids = StreamIds()
        self._shm: int | None = None  # the -shm file, read by wal_index

    # -- lifecycle -------------------------------------------------------------------------
    def open(self) -> list[str]:
        """Raises DataDirInUse when another process has the data directory, DatabaseTooNew
        for a database from a newer logstore."""
        self.lock.acquire()
        conn = None
        try:
            conn = connect(self.path, synchronous=self.synchronous)
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            applied = migrate(conn)
        except BaseException:
            if conn is not None:
                conn.close()
            self.lock.release()
            raise
        # the writer copies the WAL into the database after it has answered a batch, not
        # inside the COMMIT of whichever push filled 1,000 pages (that push's reply waited)
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        sqlbatch.attach(conn)  # a push's writes run with the GIL given up once
        self._writer_conn = conn
        self._writer = threading.Thread(target=self._write_loop, name="logstore-writer",
                                        daemon=True)
        self.writer_alive = True
        self._writer.start()
        return applied

    def close(self) -> None:
        if self._writer is not None:
            self._queue.put(_STOP)
            self._writer.join()
            self._writer = None
        self._readers.shutdown(wait=True)
        with self._reader_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
        if self._shm is not None:
            os.close(self._shm)
            self._shm = None
        if self._writer_conn is not None:
            try:
                self._writer_conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            sqlbatch.detach(self._writer_conn)
            self._writer_conn.close()
            self._writer_conn = None
        self.lock.release()

    # -- writes ----------------------------------------------------------------------------
    async def write(self, fn: Callable[[sqlite3.Connection], T], *, rerun: bool = False) -> T:
        """Run fn(conn) inside the next group-commit transaction; return after COMMIT. With
        `rerun`, fn may be run again after a rollback (its only effects are SQLite's)."""
        return await self._on_writer(fn, alone=False, rerun=rerun)

    async def truncate_wal(self, wait_ms: int = 0) -> bool:
        """After sealing: the WAL's pages go into the database and the file is emptied, so
        a store at rest is its database file alone (a reader of an older snapshot makes
        this wait up to `wait_ms`, then give up until next time: False)."""
        return await self._on_writer(lambda conn: _truncate_wal(conn, wait_ms), alone=True)

    async def _on_writer(self, fn: Callable[[sqlite3.Connection], T], alone: bool,
                         rerun: bool = False) -> T:
        if not self.writer_alive:
            raise RuntimeError("the writer is not running")
        import asyncio  # here: the query workers import this module for connect() alone
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queue.put(_Work(fn, future, loop, alone, rerun))
        return await future

    def write_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Blocking variant for threads and start-up code."""
        future: Future = Future()
        self._queue.put(_Work(fn, future, None))
        return future.result()

    def _write_loop(self) -> None:
        conn = self._writer_conn
        assert conn is not None
        try:
            while True:
                batch, stop = next_batch(self._queue, _STOP)
                if batch:
                    self._run_batch(conn, batch)
                if stop:
                    return
                self._checkpoint_if_due(conn)
        finally:
            self.writer_alive = False

    def _checkpoint_if_due(self, conn: sqlite3.Connection) -> None:
        """After a batch was answered: copy the WAL's frames into the database once
        CHECKPOINT_PAGES of them wait (PASSIVE: never waiting for a reader of an older
        snapshot, whose frames are copied next time). The writer does it itself, between
        batches, so that the copy completes and the next transaction starts the WAL over; a
        checkpoint thread beside it never caught up with the pushes, and the WAL grew to
        hundreds of megabytes. SQLite's step runs without the GIL: replies and the next
        pushes' decoding go on meanwhile."""
        if self._wal_frames_waiting() < CHECKPOINT_PAGES:
            return
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            log.warning("checkpoint failed, retried after the next batch: %s", exc)

    def wal_index(self) -> tuple[int, int]:
        """(mxFrame, nBackfill) of the wal-index in the -shm file: the frames written to the
        WAL, and how many of them are copied into the database (offsets 16 and 96, native
        byte order, https://www.sqlite.org/walformat.html); SQLite offers no call for it.
        Raises OSError or struct.error when the file cannot be read."""
        if self._shm is None:
            self._shm = os.open(self.path + "-shm", os.O_RDONLY)
        header = os.pread(self._shm, 100, 0)
        return _U32.unpack_from(header, 16)[0], _U32.unpack_from(header, 96)[0]

    def _wal_frames_waiting(self) -> int:
        """Frames written to the WAL and not yet copied into the database."""
        try:
            written, copied = self.wal_index()
        except (OSError, struct.error):
            return CHECKPOINT_PAGES  # cannot tell: copy, as SQLite itself would have by now
        return written - copied

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Work]) -> None:
        alone = [w for w in batch if w.alone]
        if alone:
            batch = [w for w in batch if not w.alone]
            if batch:
                self._run_batch(conn, batch)
            for work in alone:
                try:
                    value = work.fn(conn)
                except Exception as exc:  # noqa: BLE001 - handed to the caller
                    _resolve(work, False, exc)
                else:
                    _resolve(work, True, value)
            return
        results: list[tuple[_Work, bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            if len(batch) == 1:
                results.append(self._run_alone(conn, batch[0]))
            elif not all(w.rerun for w in batch) or not self._run_at_once(conn, batch, results):
                self._run_together(conn, batch, results)
            if conn.in_transaction:  # not when a lone caller failed and rolled it back
                conn.execute("COMMIT")
                self.commits += 1
            if any(ok for _, ok, _ in results):
                self.disk_full = False
        except BaseException as exc:  # noqa: BLE001
            if _full(exc):
                log.error("group commit failed, the disk is full: %s", exc)
            else:
                log.exception("group commit failed")
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            self._forget()
            results = [(w, False, exc) for w in batch]
        self._settle(results)

    def _run_alone(self, conn: sqlite3.Connection, work: _Work) -> tuple[_Work, bool, Any]:
        """The only caller of a transaction: no savepoint, as its failure rolls all of it
        back. A savepoint is not free: SQLite copies every page that existed before it into
        a sub-journal (a temporary file past 64 KiB) the first time the work changes it, 450
        KB for a push of 500 new streams, whose postings touch pages all over the index."""
        try:
            return work, True, work.fn(conn)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            if _full(exc) or not conn.in_transaction:
                raise  # as a failed group commit: logged, rolled back
            conn.execute("ROLLBACK")
            self._forget()
            return work, False, exc

    def _run_at_once(self, conn: sqlite3.Connection, batch: list[_Work],
                     results: list[tuple[_Work, bool, Any]]) -> bool:
        """Works that may run again, without a savepoint each: True when all succeeded;
        else the transaction is rolled back and begun again (False), and _run_together
        runs them each in its savepoint, so that the one that fails fails alone. A savepoint
        copies every page a work changes the first time (about 150 for a realistic push)
        and costs two of the writer's steps, each a wait for the GIL."""
        values = []
        try:
            for work in batch:
                values.append(work.fn(conn))
        except Exception:  # noqa: BLE001 - run again, each alone, to learn whose it is
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._forget()
            conn.execute("BEGIN IMMEDIATE")
            return False
        results.extend((work, True, value) for work, value in zip(batch, values))
        return True

    def _run_together(self, conn: sqlite3.Connection, batch: list[_Work],
                      results: list[tuple[_Work, bool, Any]]) -> None:
        for work in batch:
            # a savepoint per caller: one failing request does not fail its neighbours
            conn.execute("SAVEPOINT work")
            try:
                value = work.fn(conn)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                try:
                    conn.execute("ROLLBACK TO work")
                    conn.execute("RELEASE work")
                except sqlite3.Error:
                    raise exc from None  # SQLite rolled the whole transaction back
                self._forget()  # the caller may have learnt ids of streams it made
                results.append((work, False, exc))
            else:
                conn.execute("RELEASE work")
                results.append((work, True, value))

    def _forget(self) -> None:
        """After a rollback: the writer's map of stream ids may name streams that are gone."""
        self.stream_ids.forget()

    def _settle(self, results: list[tuple[_Work, bool, Any]]) -> None:
        for work, ok, value in results:
            if not ok and _full(value):
                self.disk_full = True
                value = DiskFull(f"the disk is full, nothing was written: {value}")
            _resolve(work, ok, value)

    # -- reads -----------------------------------------------------------------------------
    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, readonly=True)
            self._local.conn = conn
            with self._reader_lock:
                self._reader_conns.append(conn)
        return conn

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run fn(conn, *args) on a reader thread with its own connection."""
        import asyncio
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._read_call, fn, args)

    def _read_call(self, fn: Callable[..., T], args: tuple) -> T:
        conn = self._reader()
        return fn(conn, *args)

    def read_sync(self, fn: Callable[..., T], *args: Any) -> T:
        return self._readers.submit(self._read_call, fn, args).result()

    async def probe(self) -> str | None:
        """Shared state kept here is a file of this host: nothing to reach (/ready)."""
        return None

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                total += os.path.getsize(self.path + suffix)
            except OSError:
                pass
        return total


def next_batch(waiting: Any, stop_mark: object) -> tuple[list, bool]:
    """A group-commit writer's next batch: the first item waiting (blocking for it) and
    everything already behind it; whether `stop_mark` came (the batch may then be empty).
    The log store on ClickHouse batches its writes with the same two functions."""
    first = waiting.get()
    if first is stop_mark:
        return [], True
    batch = [first]
    while True:  # fold in everything that is already waiting
        try:
            item = waiting.get_nowait()
        except queue.Empty:
            return batch, False
        if item is stop_mark:
            return batch, True
        batch.append(item)


def settle(future: Any, loop: Any, ok: bool, value: Any) -> None:
    """Hand a writer's result to its caller: on the caller's event loop (`loop`), or
    directly for a caller without one (None)."""
    if loop is None:
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
        return

    def on_loop() -> None:
        if future.done():  # the caller went away (cancelled); the data is committed anyway
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    try:
        loop.call_soon_threadsafe(on_loop)
    except RuntimeError:  # loop closed
        pass


def _resolve(work: _Work, ok: bool, value: Any) -> None:
    settle(work.future, work.loop, ok, value)
