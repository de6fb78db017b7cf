"""The shared state on PostgreSQL (`storage.shared.url: postgresql://...`, docs/scale-out.md).

`PostgresState` offers what the SQLite `Database` offers the services that keep shared state
(`read(fn, *args)`, `write(fn)` and their blocking forms), so storage/grafana, storage/rules,
storage/deletes and storage/patterns run unchanged on either: `fn` receives a connection
whose `execute` takes the SQLite dialect those modules are written in and hands PostgreSQL
its own (`translate`).

Every write is one SERIALIZABLE transaction, retried when PostgreSQL reports a conflict with
another node's: a check-then-insert (a dashboard's uid, a team's name) behaves as it does
behind SQLite's one writer. A connection that fails becomes `StoreUnavailable` (503) and is
opened again on the next use.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from logql.errors import StoreUnavailable
from storage.db import migrations_in

log = logging.getLogger("logstore.shared")

T = TypeVar("T")
CONFLICT_RETRIES = 8
CONNECT_TIMEOUT_S = 5


class SharedStateTooNew(Exception):
    def __init__(self, unknown: list[int]):
        super().__init__(
            f"the shared state (PostgreSQL) has schema versions {unknown} that this logstore "
            "does not know: it was written by a newer logstore; run that version")


def migration_files() -> list[tuple[int, str, str]]:
    return migrations_in(resources.files("storage.shared") / "migrations")


# -- the SQLite dialect, as PostgreSQL ----------------------------------------------------------
# lists travel as one JSON array unpacked by json_each (storage/grafana/objects.py): here the
# array becomes a PostgreSQL array and the membership test `= ANY`
_JSON_IN = re.compile(r"\bIN \(SELECT value FROM json_each\((\?\d*)\)\)")
_JSON_AGG = re.compile(r"\bjson_group_array\(([^()]*)\)")
# SQLite's LIKE ignores ASCII case and has no escape character unless told
_LIKE = re.compile(r"\bLIKE (\?\d*)")
_PLACEHOLDER = re.compile(r"\?(J?)(\d*)")


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> tuple[str, tuple[tuple[int, bool], ...] | None]:
    """PostgreSQL's text for a statement, and where its parameters come from: per `%s`, the
    index into the SQLite arguments and whether it is a JSON list (None: in order)."""
    sql = _JSON_IN.sub(lambda m: "= ANY(?J" + m.group(1)[1:] + ")", sql)
    sql = _JSON_AGG.sub(r"COALESCE(json_agg(\1)::text, '[]')", sql)
    sql = _LIKE.sub(r"ILIKE \1 ESCAPE ''", sql)
    sql = sql.replace("%", "%%")
    sources: list[tuple[int, bool]] = []
    numbered = False

    def place(m: re.Match) -> str:
        nonlocal numbered
        if m.group(2):
            numbered = True
            sources.append((int(m.group(2)) - 1, bool(m.group(1))))
        else:
            sources.append((len(sources), bool(m.group(1))))
        return "%s"

    out = _PLACEHOLDER.sub(place, sql)
    plain = not numbered and not any(is_json for _, is_json in sources)
    return out, None if plain else tuple(sources)


_INT64 = range(-2 ** 63, 2 ** 63)


def _arguments(sources: tuple[tuple[int, bool], ...] | None, args: Sequence[Any]) -> Sequence:
    for arg in args:
        # sqlite3 refuses an integer SQLite cannot store, PostgreSQL would compare it as a
        # numeric: refused here too, a request naming one fails alike on both
        if type(arg) is int and arg not in _INT64:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
    if sources is None:
        return args
    return [json.loads(args[i]) if is_json else args[i] for i, is_json in sources]


class Connection:
    """What storage modules use of a sqlite3.Connection, over a psycopg one."""

    def __init__(self, raw: Any):
        self.raw = raw

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        text, sources = translate(sql)
        return self.raw.execute(text, _arguments(sources, args) if args else None)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        text, sources = translate(sql)
        cur = self.raw.cursor()
        cur.executemany(text, [_arguments(sources, r) for r in rows])
        return cur


def _numeric_loader() -> type:
    from psycopg.adapt import Loader

    class NumericAsNumber(Loader):
        """sum() and avg() are numeric in PostgreSQL; SQLite gives int or float, and so
        does this (a Decimal cannot be written as JSON)."""

        def load(self, data: Any) -> int | float:
            text = bytes(data).decode()
            return int(text) if text.lstrip("-").isdigit() else float(text)

    return NumericAsNumber


class PostgresState:
    """Connections per thread of a small pool; `open` migrates the schema once per cluster
    (under an advisory lock: nodes may start together)."""

    def __init__(self, url: str, password: str = "", *, connections: int = 8):
        self.url = url
        self.password = password
        self._pool = ThreadPoolExecutor(max_workers=connections,
                                        thread_name_prefix="logstore-shared")
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self._loader = _numeric_loader()

    # -- connections -----------------------------------------------------------------------
    def _connect(self) -> Any:
        import psycopg

        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
        if self.password:
            kwargs["password"] = self.password
        try:
            raw = psycopg.connect(self.url, **kwargs)
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"the shared state (PostgreSQL) cannot be reached: {_first_line(exc)}") from exc
        raw.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
        raw.adapters.register_loader("numeric", self._loader)
        with self._lock:
            self._all.append(raw)
        return raw

    def _conn(self) -> Any:
        raw = getattr(self._local, "raw", None)
        if raw is None or raw.closed:
            raw = self._local.raw = self._connect()
        return raw

    def _forget(self) -> None:
        raw = getattr(self._local, "raw", None)
        self._local.raw = None
        if raw is not None:
            try:
                raw.close()
            except Exception:  # already broken: nothing to tell
                pass

    def _run(self, fn: Callable[..., T], args: tuple, transaction: bool) -> T:
        import psycopg
        from psycopg import errors

        for attempt in range(CONFLICT_RETRIES):
            pooled = getattr(self._local, "raw", None) is not None
            raw = self._conn()
            begun = False
            try:
                with raw.transaction():
                    if transaction:
                        begun = True
                    else:
                        # a read sees one snapshot, as a SQLite reader does, and never
                        # conflicts with a writer
                        raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, "
                                    "READ ONLY")
                    return fn(Connection(raw), *args)
            except (errors.SerializationFailure, errors.DeadlockDetected):
                if attempt == CONFLICT_RETRIES - 1:
                    raise
                # another node's transaction won: run this one again on what it wrote
                time.sleep(random.uniform(0, 0.005 * (2 ** attempt)))
            except psycopg.OperationalError as exc:
                self._forget()
                if pooled and not begun and attempt == 0:
                    # a pooled connection PostgreSQL closed while it sat idle (it restarted):
                    # a read, or a transaction that failed at BEGIN, changed nothing there,
                    # so once more on a new connection rather than a 503 per stale one
                    continue
                raise StoreUnavailable(
                    f"the shared state (PostgreSQL) cannot be reached: {_first_line(exc)}"
                ) from exc
        raise AssertionError("unreachable")

    # -- what the services call ------------------------------------------------------------
    async def write(self, fn: Callable[[Connection], T]) -> T:
        """fn(conn) in one transaction; returns after COMMIT."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._run, fn, (), True)

    def write_sync(self, fn: Callable[[Connection], T]) -> T:
        return self._pool.submit(self._run, fn, (), True).result()

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._run, fn, args, False)

    def read_sync(self, fn: Callable[..., T], *args: Any) -> T:
        return self._pool.submit(self._run, fn, args, False).result()

    async def probe(self) -> str | None:
        try:
            await self.read(lambda conn: conn.execute("SELECT 1").fetchone())
        except StoreUnavailable as exc:
            return str(exc)
        return None

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """Held by one node of the cluster at a time (a PostgreSQL advisory lock on a
        connection of its own, let go with it): work such as another store's migrations,
        which nodes starting together must not each do."""
        raw = self._connect()
        try:
            raw.execute("SELECT pg_advisory_lock(hashtext(%s))", (name,))
            yield
        finally:
            raw.close()

    # -- lifetime --------------------------------------------------------------------------
    def open(self) -> list[str]:
        """Bring the schema up to date; the names of the migrations applied. Raises
        StoreUnavailable when PostgreSQL cannot be reached, SharedStateTooNew for a schema
        from a newer logstore."""
        return self._pool.submit(self._run, _migrate, (), True).result()

    async def start(self) -> None:
        applied = await asyncio.to_thread(self.open)
        if applied:
            log.info("applied shared-state migrations: %s", ", ".join(applied))

    async def stop(self) -> None:
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._lock:
            for raw in self._all:
                try:
                    raw.close()
                except Exception:  # closing a broken connection: nothing to tell
                    pass
            self._all.clear()


def _migrate(conn: Connection) -> list[str]:
    raw = conn.raw
    # one node migrates, the others wait and then find the work done
    raw.execute("SELECT pg_advisory_xact_lock(hashtext('logstore schema_version'))")
    raw.execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
    done = {r[0] for r in raw.execute("SELECT version FROM schema_version")}
    files = migration_files()
    unknown = sorted(done - {v for v, _, _ in files})
    if unknown:
        raise SharedStateTooNew(unknown)
    applied = []
    for version, name, sql in files:
        if version in done:
            continue
        raw.execute(sql)
        raw.execute("INSERT INTO schema_version (version, name) VALUES (%s, %s)",
                    (version, name))
        applied.append(name)
    return applied


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
