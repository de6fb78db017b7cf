"""The storage matrix: the states a user's data can be in when it is read, and the one
fixture-side mechanism that puts it there.

    head    every line still in the head (the sealer is off, nothing seals), as packs: the
            form of a stream's large pushes (storage/entries.py), so the settler turns the
            rows small pushes leave in `entries` into a pack per stream
    sealed  every line in sealed blocks of at most 50 rows (many blocks per stream, so the
            readers' merging across blocks is exercised), the head empty
    split   the older half of the lines (by timestamp, then id) sealed, the newer half in the
            head (as pushed: `entries` rows for small pushes, packs for large ones): the
            usual state of a running server, and the one where a reader must merge blocks
            with the head
    clickhouse  `storage.backend: clickhouse` on the embedded engine (chdb): every line in
            ClickHouse, the SQLite file's head and blocks empty; and the shared state
            (delete requests, patterns, rules, Grafana's objects) in a real PostgreSQL, as
            nodes of a cluster keep it (`storage.shared.url`), where PostgreSQL is installed

Only the settler seals (the background sealer is disabled in every state), so the state a
test reads is exactly the promised one, and the settler asserts it (blocks non-empty, head
empty, or both) before the read goes out. A second storage backend plugs in here: a new
state name, its config and its settle step.

Which test directories run in which states is decided in tests/conftest.py (MATRIX).
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Callable

import httpx
from litestar.testing import TestClient

STATES = ("head", "sealed", "split")
CLICKHOUSE = "clickhouse"
BLOCK_ROWS = 50
_embedded_dir: str | None = None
_postgres: Any = None
# a ClickHouse server for the clickhouse state (pytest --clickhouse-url); empty: chdb
SERVER_URL = ""
TEMPLATE = "logstore_template"


def _embedded() -> str:
    """The one chdb directory of this test process: chdb runs one embedded server per
    process, so every in-process app of the clickhouse state shares it, each with a
    database of its own."""
    global _embedded_dir
    if _embedded_dir is None:
        _embedded_dir = tempfile.mkdtemp(prefix="logstore-chdb-")
        atexit.register(shutil.rmtree, _embedded_dir, True)
    return _embedded_dir


def _shared_database(name: str) -> str | None:
    """The URL of the PostgreSQL database `name` for the shared state, created on first use
    from a migrated template (a tenth of a second, against a migration's); None without
    PostgreSQL outside CI (tests/conftest.py makes CI fail without it)."""
    global _postgres
    import psycopg

    from storage.shared.postgres import PostgresState
    from tests import postgres

    if _postgres is None:
        if postgres.binaries() is None:
            return None
        _postgres = postgres.start_server()
        atexit.register(_postgres.close)
        with psycopg.connect(_postgres.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        state = PostgresState(_postgres.url(TEMPLATE))
        state.open()
        state.close()
    with psycopg.connect(_postgres.url(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() \
                is None:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    return _postgres.url(name)


def clickhouse_config(data_dir: Path | None, own_process: bool = False) -> dict[str, Any]:
    """`storage.backend: clickhouse` alone, in a database named after `data_dir` (an app
    opened again on it finds its data)."""
    assert data_dir is not None
    name = "t_" + hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:16]
    if SERVER_URL:
        url = SERVER_URL
    else:
        url = "chdb://" + (f"{Path(data_dir).resolve()}-chdb" if own_process else _embedded())
    return {"backend": "clickhouse", "clickhouse": {"url": url, "database": name}}


def storage_config(state: str | None, data_dir: Path | None = None,
                   own_process: bool = False) -> dict[str, Any]:
    """The `storage` settings a state runs with (none outside the matrix). The clickhouse
    state names a database after `data_dir` (an app opened again on it finds its data);
    `own_process`: a server subprocess, whose chdb directory sits beside its data."""
    if state is None:
        return {}
    if state == CLICKHOUSE:
        cfg = clickhouse_config(data_dir, own_process)
        shared = _shared_database(cfg["clickhouse"]["database"])
        return {**cfg, "shared": {"url": shared}} if shared else cfg
    cfg: dict[str, Any] = {"sealing_enabled": False}
    if state != "head":
        cfg.update({"block_window": "1m", "block_max_rows": BLOCK_ROWS})
    return cfg


def is_write(path: str) -> bool:
    """Requests that add lines (every push route and OTLP): the settler runs before the next
    request that is not one of these."""
    return "push" in path or path.endswith("/v1/logs")


def counts(db_path: str | Path) -> tuple[int, int]:
    """(head rows, sealed rows) as one snapshot."""
    from tests.helpers import head_rows

    conn = sqlite3.connect(str(db_path), timeout=60, isolation_level=None)
    try:
        conn.execute("BEGIN")
        head = head_rows(conn)
        sealed = conn.execute("SELECT coalesce(sum(rows), 0) FROM blocks "
                              "WHERE NOT flags & 4").fetchone()[0]
        conn.execute("COMMIT")
        return head, sealed
    finally:
        conn.close()


def seal_older_half(db_path: str | Path, max_id: int | None = None) -> int:
    """Seal the older half of the head (by ts, then id; only ids <= max_id when the pattern
    miner holds newer rows back) into blocks of BLOCK_ROWS, on a connection of our own, one
    transaction per stream. A stream's packs are taken apart: their newer rows go back as
    one pack. Returns the rows sealed."""
    from storage.blocks import codec as blocks, sealing
    from storage.blocks.catalog import insert_block
    from storage.deletes import block_rows

    conn = sqlite3.connect(str(db_path), timeout=60, isolation_level=None)
    try:
        rows = [(sid, (i, ts, line, md), False) for sid, i, ts, line, md in conn.execute(
            "SELECT stream_id, id, ts, line, metadata FROM entries")]
        packs: dict[int, list[int]] = {}
        for pid, sid in conn.execute("SELECT id, stream_id FROM blocks WHERE flags & 4"):
            packs.setdefault(sid, []).append(pid)
            rows.extend((sid, r, True) for r in block_rows(conn, pid))
        rows.sort(key=lambda x: (x[1][1], x[1][0]))
        older = {x[1][0] for x in rows[: len(rows) // 2]}
        if max_id is not None:
            older = {i for i in older if i <= max_id}
        per_stream: dict[int, list[tuple]] = {}
        for sid, row, packed in sorted(rows, key=lambda x: (x[0], x[1][1], x[1][0])):
            per_stream.setdefault(sid, []).append((row, packed))
        sealed = 0
        for sid, items in per_stream.items():
            seal = [(r, packed) for r, packed in items if r[0] in older]
            repack = [r for r, packed in items if packed and r[0] not in older]
            conn.execute("BEGIN IMMEDIATE")
            try:
                for pid in packs.get(sid, []):
                    conn.execute("DELETE FROM blocks WHERE id = ?", (pid,))
                for i in range(0, len(seal), BLOCK_ROWS):
                    chunk = seal[i:i + BLOCK_ROWS]
                    sealing.store_block(conn, sid, blocks.encode([r for r, _ in chunk]),
                                        [r[0] for r, packed in chunk if not packed])
                if repack:
                    insert_block(conn, sid, blocks.encode(repack, pack=True))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            sealed += len(seal)
        return sealed
    finally:
        conn.close()


def rows_to_packs(db_path: str | Path) -> int:
    """The head's `entries` rows as a pack per stream (same ids), in one transaction on a
    connection of our own. Returns the rows moved."""
    from storage.blocks import codec as blocks
    from storage.blocks.catalog import insert_block

    conn = sqlite3.connect(str(db_path), timeout=60, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        per_stream: dict[int, list[tuple]] = {}
        for sid, *row in conn.execute("SELECT stream_id, id, ts, line, metadata FROM entries"):
            per_stream.setdefault(sid, []).append(tuple(row))
        for sid, rows in per_stream.items():
            insert_block(conn, sid, blocks.encode(rows, pack=True))
        conn.execute("DELETE FROM entries")
        conn.execute("COMMIT")
        return sum(map(len, per_stream.values()))
    finally:
        conn.close()


def clickhouse_store(app: Any) -> Any:
    """The app's ClickHouse log store, None when its log data is in the SQLite file."""
    store = app.state.services.querier.store
    return store if store.__class__.__name__ == "ClickHouseLogs" else None


def _head_rows_in_entries(db_path: str | Path) -> int:
    conn = sqlite3.connect(str(db_path), timeout=60)
    try:
        return conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        conn.close()


class StateError(AssertionError):
    pass


def check_state(state: str, head: int, sealed: int, elsewhere: int | None = None) -> None:
    """The promise of each state, given that something is stored (`elsewhere`: the rows
    in ClickHouse, None when this process cannot count them)."""
    if state == CLICKHOUSE:
        if head or sealed or elsewhere == 0:
            raise StateError(f"storage state {state!r} promised, found {head} head rows and "
                             f"{sealed} sealed rows in SQLite and {elsewhere} in ClickHouse")
        return
    if state == "head":
        ok = sealed == 0 and head > 0
    elif state == "sealed":
        ok = head == 0 and sealed > 0
    else:  # split: both non-empty, unless a single line is all there is
        ok = (head > 0 and sealed > 0) if head + sealed >= 2 else head + sealed == 1
    if not ok:
        raise StateError(f"storage state {state!r} promised, found {head} head rows and "
                         f"{sealed} sealed rows")


class Settler:
    """Puts one database into the promised state before a read that follows a write."""

    def __init__(self, state: str | None, db_path: Callable[[], str | Path],
                 flush: Callable[[], None], gate: Callable[[], int | None] = lambda: None,
                 elsewhere: Callable[[], int | None] = lambda: None,
                 shared: Callable[[], str] = lambda: "Database"):
        self.state = state
        self.elsewhere = elsewhere
        self.shared = shared  # the class keeping the shared state
        self.db_path = db_path
        self.flush = flush
        self.gate = gate
        self.dirty = False
        self.settled = 0   # how often it acted: tests of the matrix itself read this

    def settle(self) -> None:
        if self.state is None or not self.dirty:
            return
        self.dirty = False
        path = self.db_path()
        head, sealed = counts(path)
        if self.state == CLICKHOUSE:
            check_state(self.state, head, sealed, self.elsewhere())
            if _postgres is not None and self.shared() != "PostgresState":
                raise StateError(f"storage state {self.state!r} promised the shared state in "
                                 f"PostgreSQL, found it in {self.shared()}")
            self.settled += 1
            return
        if head + sealed == 0:
            return
        if self.state == "sealed" and head:
            self.flush()
        elif self.state == "split" and head >= 2 and not sealed:
            seal_older_half(path, self.gate())
        elif self.state == "head":
            rows_to_packs(path)
        head, sealed = counts(path)
        check_state(self.state, head, sealed)
        if self.state == "head" and _head_rows_in_entries(path):
            raise StateError("storage state 'head' promised packs, found `entries` rows")
        self.settled += 1


class MatrixClient(TestClient):
    """A TestClient whose reads find the data in the state of `settler`: every request
    that is not a push settles first (the websocket tail included)."""

    settler: Settler

    def request(self, method: str, url: Any, *args: Any, **kwargs: Any) -> httpx.Response:
        path = httpx.URL(str(url)).path
        if is_write(path):
            try:
                return super().request(method, url, *args, **kwargs)
            finally:
                self.settler.dirty = True
        self.settler.settle()
        return super().request(method, url, *args, **kwargs)

    def websocket_connect(self, url: str, *args: Any, **kwargs: Any):
        self.settler.settle()
        return super().websocket_connect(url, *args, **kwargs)


def _admin_headers(app: Any) -> dict[str, str]:
    token = app.state.services.config.server.admin_token
    return {"Authorization": f"Bearer {token}"} if token else {}


def open_client(app: Any, state: str | None) -> MatrixClient:
    """A MatrixClient over `app`, to be entered (`with`) by the caller."""
    client = MatrixClient(app)

    def flush() -> None:
        # the service's own /flush: the sealer (and the pattern miner's gate before it)
        r = TestClient.request(client, "POST", "/flush", headers=_admin_headers(app))
        assert r.status_code == 204, r.text

    def gate() -> int | None:
        sealer = app.state.services.sealer
        if sealer is None or sealer.gate is None:
            return None
        return client.blocking_portal.call(sealer.gate)

    def elsewhere() -> int | None:
        store = clickhouse_store(app)
        return None if store is None else store.rows()

    client.settler = Settler(state, lambda: app.state.services.db.path, flush, gate,
                             elsewhere, lambda: type(app.state.services.shared).__name__)
    return client
