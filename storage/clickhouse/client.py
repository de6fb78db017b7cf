"""One way to talk to ClickHouse whatever runs it: the embedded engine (`chdb:///dir`) or a
server over HTTP(S) (`http://host:8123`, through clickhouse-connect).

Statements are always parameterised with ClickHouse's own `{name:Type}` placeholders: values
travel beside the SQL text, never inside it. Results come back as lists of tuples; inserts
take rows of Python values. The embedded engine runs one statement at a time per process,
so calls are serialised here; a server takes them concurrently.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Sequence
from urllib.parse import urlparse

import msgspec

from logql.errors import StoreUnavailable

ASYNC_INSERT = {"async_insert": 1, "wait_for_async_insert": 1}
# into a cluster's Distributed tables: answered once every shard has stored its rows (one
# replica each; Keeper copies them to the others), where by default the Distributed table
# answers first and forwards them in the background
CLUSTER_INSERT = {"insert_distributed_sync": 1}
# what /ready says while the server cannot be reached
UNREACHABLE = "the log store (ClickHouse) cannot be reached"
# how long close() waits for the statements still running on the embedded engine
CLOSE_WAIT_S = 60.0

log = logging.getLogger("logstore.clickhouse")

_decode_rows = msgspec.json.Decoder(list[list[Any]]).decode
_encode = msgspec.json.Encoder().encode

# Int64/UInt64 as JSON numbers, not strings (the default of older servers)
_OUTPUT_SETTINGS = {"output_format_json_quote_64bit_integers": 0}


class ClickHouseError(StoreUnavailable):
    """A statement ClickHouse refused, or a server that could not be reached."""


@dataclass(frozen=True)
class Target:
    url: str
    database: str = "logstore"
    user: str = "default"
    password: str = ""
    cluster: str = ""


def _params(params: dict[str, Any] | None) -> dict[str, str]:
    return {k: _param_text(v) for k, v in (params or {}).items()}


def _param_text(value: Any) -> str:
    """A parameter as ClickHouse's text form of its declared type."""
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_element_text(v) for v in value) + "]"
    return str(value)


def _element_text(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


class _Embedded:
    """chdb runs one embedded server per process, on one directory at a time: every client
    of that directory shares it (each thread with a connection of its own, so a long read
    does not hold up a push); another directory can open once the last client closed."""

    lock = threading.Lock()
    path: str | None = None
    users = 0

    @classmethod
    def acquire(cls, path: str) -> None:
        with cls.lock:
            if cls.users and cls.path != path:
                raise ClickHouseError(
                    f"the embedded ClickHouse of this process already runs on {cls.path}; "
                    f"chdb cannot open {path} beside it")
            os.makedirs(path, exist_ok=True)
            cls.path = path
            cls.users += 1

    @classmethod
    def release(cls) -> None:
        with cls.lock:
            cls.users -= 1
            if cls.users == 0:
                cls.path = None


class Client:
    """query() and insert() over the embedded engine or a server."""

    def __init__(self, target: Target):
        self.target = target
        self.embedded = target.url.startswith("chdb://")
        self._path: str | None = None      # the embedded engine's directory, once open
        self._local = threading.local()    # this thread's chdb connection
        self._connections: list[Any] = []
        self._connections_lock = threading.Lock()
        # statements running on the embedded engine: close() waits for them, as closing a
        # connection under a running statement brings the whole process down
        self._running = 0
        self._settled = threading.Condition(self._connections_lock)
        self._http: Any = None

    # -- connecting -------------------------------------------------------------------------
    def open(self) -> None:
        if self.embedded:
            if self._path is None:
                path = urlparse(self.target.url).path or "/"
                _Embedded.acquire(path)
                self._path = path
                try:
                    self._connection()
                except Exception:
                    self.close()
                    raise
        else:
            import clickhouse_connect
            u = urlparse(self.target.url)
            try:
                self._http = clickhouse_connect.get_client(
                    host=u.hostname, port=u.port or (8443 if u.scheme == "https" else 8123),
                    username=self.target.user, password=self.target.password,
                    secure=u.scheme == "https", settings=_OUTPUT_SETTINGS)
            except Exception as exc:  # noqa: BLE001 - any connection failure
                raise ClickHouseError(f"cannot reach ClickHouse at {self.target.url}: {exc}"
                                      ) from None

    def close(self) -> None:
        if self._path is not None:
            with self._settled:
                self._path = None  # under the lock: no statement starts after this
                if not self._settled.wait_for(lambda: self._running == 0, CLOSE_WAIT_S):
                    log.warning("closing the embedded ClickHouse with %d statements still "
                                "running", self._running)
                connections, self._connections = self._connections, []
                self._local = threading.local()
            for conn in connections:
                conn.close()
            _Embedded.release()
        if self._http is not None:
            self._http.close()
            self._http = None

    # -- statements -------------------------------------------------------------------------
    def query(self, sql: str, params: dict[str, Any] | None = None,
              settings: dict[str, int] | None = None) -> list[list[Any]]:
        """Rows of a SELECT, each a list of column values; `settings` for this statement
        (integers: `max_execution_time`)."""
        if self._http is not None:
            return [list(r) for r in self._on_server(
                self._http.query, sql, parameters=_params(params), settings=settings
            ).result_rows]
        text = self._embedded(sql, "JSONCompactEachRow", params,
                              {**_OUTPUT_SETTINGS, **(settings or {})}).bytes()
        if not text:
            return []
        return _decode_rows(b"[" + text.rstrip(b"\n").replace(b"\n", b",") + b"]")

    def query_arrow(self, sql: str, params: dict[str, Any] | None = None,
                    settings: dict[str, int] | None = None) -> Any:
        """A SELECT's result as a pyarrow Table (columns, not rows: what a columnar reader
        hands on without a Python object per value)."""
        if self._http is not None:
            return self._on_server(self._http.query_arrow, sql, parameters=_params(params),
                                   settings=settings)
        return self._embedded(sql, "ArrowTable", params, settings)

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        """A statement without rows (DDL, DELETE)."""
        if self._http is not None:
            self._on_server(self._http.command, sql, parameters=_params(params))
        else:
            self._embedded(sql, "CSV", params)

    def insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Rows into `table`; returns once ClickHouse has written them."""
        rows = list(rows)
        if not rows:
            return
        if self._http is not None:
            # several nodes each committing their group of pushes would make many small
            # parts (ClickHouse asks for about one insert per second per table): the server
            # gathers the inserts of every node into one part, and answers each only once
            # that part is written
            self._on_server(self._http.insert, table, rows, column_names=list(columns),
                            settings=CLUSTER_INSERT if self.target.cluster else ASYNC_INSERT)
            return
        body = b"\n".join(map(_encode, rows))
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) FORMAT JSONCompactEachRow\n"
               + body.decode("utf-8", "surrogatepass"))
        self._embedded(sql, "CSV", None)

    @staticmethod
    def _on_server(call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure of the server or the network
            raise ClickHouseError(str(exc)) from None

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            import chdb  # imported only by the backend that needs it

            # called with a statement counted as running (_embedded): close() waits for it,
            # so the directory stays open while this thread connects, and the connection is
            # among those close() closes
            path = self._path
            if path is None:
                raise ClickHouseError("the ClickHouse store is closed")
            try:
                conn = chdb.connect(path)
            except Exception as exc:  # noqa: BLE001 - chdb raises its own error types
                raise ClickHouseError(str(exc)) from None
            with self._connections_lock:
                self._connections.append(conn)
            self._local.conn = conn
        return conn

    def _embedded(self, sql: str, fmt: str, params: dict[str, Any] | None,
                  settings: dict[str, int] | None = None) -> Any:
        """The statement on this thread's chdb connection; chdb's result object."""
        if settings:
            sql += " SETTINGS " + ", ".join(f"{k} = {int(v)}" for k, v in settings.items())
        with self._settled:
            if self._path is None:
                raise ClickHouseError("the ClickHouse store is closed")
            self._running += 1
        try:
            return self._connection().query(sql, fmt, params=_params(params) or None)
        except ClickHouseError:
            raise
        except Exception as exc:  # noqa: BLE001 - chdb raises its own error types
            raise ClickHouseError(str(exc)) from None
        finally:
            with self._settled:
                self._running -= 1
                if self._running == 0:
                    self._settled.notify_all()
