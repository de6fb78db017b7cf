"""The read service: LogQL queries, labels, values and series, and the tail's history.

Routes hand it parsed requests and encode what it returns; it runs each read on a reader
thread through the engine's storage protocol (`logql.reading.Reader`: the SQLite reader,
wrapped in `services.read.visibility.VisibleReader`), under one deadline (the tenant's
`query_timeout`) for log and metric queries alike. The request checks Loki makes before it
reads (the entries limit, the query length, the lookback) live here too, so every endpoint
that reads meets them with the same text. Failures are typed
(`logql.errors.QueryError`, `ParseError`, `storage.scan.QueryTimeout`); the HTTP status for
each is chosen once, in routes/errors.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterator, Sequence, TypeVar

import msgspec

from logql.errors import QueryError
from logql.gocompat.format import go_duration_str, prom_duration_str
from logql.syntax import ast as A
from logql.engine.logs import evaluate_log_query
from logql.engine.common import series_limit_error
from logql.engine.metrics import evaluate_metric, format_metric, plan_steps
from logql.engine.results import QueryStats
from services.runtime import memory
from services.read import volume as volume_service
from services.runtime.errors import PlainError
from services.runtime.limits import Limits
from services.read.query_gate import QueryGate
from services.read.query_pool import QueryPool, portable
from services.read.query_worker import LogJob, StepsJob
from services.read.readers import (LogStore, Reading, Scope, SqliteLogs, Visibility,
                                   limits_snapshot, reader_for, tenants_of)
from services.upkeep.retention_policy import RetentionPolicy
from services.upkeep.deletes import Deletions
from storage import streams
from storage.db import Database
from storage.streams import Matcher

T = TypeVar("T")


@dataclass
class QueryResult:
    result_type: str   # streams | vector | matrix | scalar
    result: Any        # JSON-ready, as http-api.md §4 shows it
    stats: QueryStats


def _log_ranges(node: Any) -> Iterator[A.LogRange]:
    if isinstance(node, A.LogRange):
        yield node
    elif isinstance(node, tuple):
        for item in node:
            yield from _log_ranges(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, A.LogQuery):
        for f in dataclasses.fields(node):
            yield from _log_ranges(getattr(node, f.name))


def check_interval_limit(expr: Any, limit: int) -> None:
    """`limits_config.max_query_range`: no [range] in a metric query longer than the limit
    (Loki checks it in its engine, so rules and every query endpoint meet it)."""
    if limit <= 0:
        return
    for log_range in _log_ranges(expr):
        if log_range.range_ns > limit:
            raise QueryError(f"[interval] value exceeds limit: "
                             f"[{prom_duration_str(log_range.range_ns)}] > "
                             f"[{prom_duration_str(limit)}]")


class Querier:
    def __init__(self, db: Database, limits: Limits, *, max_concurrent: int = 0,
                 max_outstanding: int = 0, retention: RetentionPolicy | None = None,
                 deletions: Deletions | None = None, pool: QueryPool | None = None,
                 store: LogStore | None = None):
        self.db = db
        # where log data is read: the SQLite file, or ClickHouse (storage.backend)
        self.store: LogStore = store if store is not None else SqliteLogs(db)
        self.limits = limits
        self.gate = QueryGate(max_concurrent, max_outstanding,
                              lambda tenant: limits.of(tenant).max_query_parallelism)
        self.reads_running = 0      # on reader threads right now (what /metrics shows)
        self.reads_cancelled = 0    # stopped because whoever asked went away
        self._count_lock = threading.Lock()
        # retention (services/upkeep/compactor.py) and log deletion (services/upkeep/deletes.py):
        # what every read must not see (services/read/readers.py)
        self.retention = retention
        self.deletions = deletions
        # log and metric queries evaluated in worker processes (None: on reader threads)
        self.pool = pool

    # -- the checks a read request meets before it runs -------------------------------------
    def check_entries_limit(self, tenant: Scope, limit: int) -> None:
        maximum = self.limits.of(tenant).max_entries_limit_per_query
        if maximum > 0 and limit > maximum:
            raise PlainError(400, "max entries limit per query exceeded, limit > "
                                  f"max_entries_limit_per_query ({limit} > {maximum})")

    def lookback_start(self, tenant: Scope, start: int) -> int:
        """`max_query_lookback`: data older than now minus it is not read; as Loki does, the
        start moves up (a range entirely before it answers an empty result)."""
        lookback = self.limits.of(tenant).max_query_lookback
        return max(start, time.time_ns() - lookback) if lookback > 0 else start

    def check_length(self, tenant: Scope, start: int, end: int) -> None:
        maximum = self.limits.of(tenant).max_query_length
        if maximum > 0 and end - start > maximum:
            raise PlainError(400, "the query time range exceeds the limit (query length: "
                                  f"{go_duration_str(end - start)}, limit: "
                                  f"{prom_duration_str(maximum)})")

    # -- reads -------------------------------------------------------------------------------
    def _visibility(self, tenant: Scope, portable: bool = False) -> Visibility:
        """What the read must not see; `portable`: as data for a worker process."""
        retention = self.retention is not None and self.retention.enabled
        deletes = self.deletions.pending_of(tenants_of(tenant)) if self.deletions else ()
        if not portable:
            return Visibility(self.limits, retention, deletes)
        now = self.retention.clock() if retention and self.retention else 0
        return Visibility(limits_snapshot(self.limits, tenant), retention, deletes, now)

    def _reader_at(self, conn: Any, tenant: Scope, began: float) -> Reading:
        return reader_for(conn, tenant, self._visibility(tenant), began, self.retention,
                          self.store)

    @contextlib.asynccontextmanager
    async def _turn(self, tenant: Scope,
                    on_cancel: Callable[[], None] = lambda: None) -> AsyncIterator[float]:
        """The tenant's turn at the gate (services/read/query_gate.py); yields when the read
        began. A caller that goes away (the client disconnected, the server stops) is
        counted, and `on_cancel` stops its read; a long read is followed by a trim."""
        key = tenant if isinstance(tenant, str) else str(tenant)
        async with self.gate.slot(key):
            began = time.monotonic()
            try:
                yield began
            except asyncio.CancelledError:
                on_cancel()
                self.reads_cancelled += 1
                raise
            finally:
                if time.monotonic() - began > memory.LONG_READ_SECONDS:
                    memory.trim_soon()  # a long read usually held large batches and results

    @contextlib.contextmanager
    def _running(self) -> Iterator[None]:
        with self._count_lock:
            self.reads_running += 1
        try:
            yield
        finally:
            with self._count_lock:
                self.reads_running -= 1

    async def _read(self, tenant: Scope, fn: Callable[[Reading], T]) -> T:
        """fn(reader) on a reader thread, once the tenant's turn comes. When the caller goes
        away the read is stopped at its next statement or deadline check, not left to run
        to the end."""
        readers: list[Reading] = []

        def run(conn: Any) -> T:
            reader = self._reader_at(conn, tenant, time.monotonic())
            readers.append(reader)
            with self._running():
                return fn(reader)

        def cancel() -> None:
            for reader in readers:
                reader.inner.cancelled = True

        async with self._turn(tenant, cancel):
            return await self.store.read(run)

    async def query(self, tenant: Scope, expr: Any, *, start: int, end: int, limit: int,
                    backward: bool, interval: int = 0, step: int = 0, instant: bool = False,
                    categorize: bool = False, queue_time: float = 0.0,
                    encoded: bool = False) -> QueryResult:
        """A parsed log or metric query over [start, end] (a metric instant query at `end`).
        `encoded`: a log result may come as its JSON text (`msgspec.Raw`), for a caller that
        only encodes it into its answer."""
        limits = self.limits.of(tenant)
        check_interval_limit(expr, limits.max_query_range)
        stats = QueryStats(queue_time=queue_time)
        submitted = time.monotonic()
        if self.pool is not None and portable(expr):
            return await self._pooled(tenant, expr, limits, stats, submitted, start=start,
                                      end=end, limit=limit, backward=backward,
                                      interval=interval, step=step, instant=instant,
                                      categorize=categorize, encoded=encoded)

        def run(reader: Reading) -> QueryResult:
            stats.queue_time += time.monotonic() - submitted
            if isinstance(expr, A.LogQuery):
                result = evaluate_log_query(reader, tenant, expr, start, end, limit=limit,
                                            backward=backward, interval_ns=interval,
                                            categorize=categorize, stats=stats)
                return QueryResult("streams", result, stats)
            out = evaluate_metric(reader, tenant, expr, start_ns=start, end_ns=end,
                                  step_ns=step, instant=instant, limits=limits, stats=stats)
            return QueryResult(out.result_type, out.result, stats)

        return await self._read(tenant, run)

    async def _pooled(self, tenant: Scope, expr: Any, limits: Any, stats: QueryStats,
                      submitted: float, *, start: int, end: int, limit: int, backward: bool,
                      interval: int, step: int, instant: bool,
                      categorize: bool, encoded: bool) -> QueryResult:
        """`query` evaluated by the worker processes, under the same gate as a reader
        thread's read (the worker is told when the caller goes away)."""
        assert self.pool is not None
        steps = None if isinstance(expr, A.LogQuery) else plan_steps(start, end, step, instant)
        async with self._turn(tenant) as began:
            queue_time = stats.queue_time + began - submitted
            vis = self._visibility(tenant, portable=True)
            with self._running():
                if steps is None:
                    result, done = await self.pool.log_query(LogJob(
                        tenant, expr, start, end, limit, backward, interval, categorize,
                        encoded), vis, began)
                    done.queue_time = queue_time
                    return QueryResult("streams", msgspec.Raw(result) if encoded else result,
                                       done)
                value, done = await self.pool.steps(
                    StepsJob(tenant, expr, steps, step if not instant else 0), vis, began)
            done.queue_time = queue_time
            out = format_metric(value, steps, instant=instant, expr=expr, limits=limits,
                                stats=done)
            done.exec_time += time.monotonic() - began
            return QueryResult(out.result_type, out.result, done)

    async def history(self, tenant: str, query: A.LogQuery, start: int, end: int, limit: int,
                      categorize: bool) -> list[dict]:
        """The newest `limit` entries a tail sends first."""
        if start >= end:
            return []
        return await self._read(tenant, lambda reader: evaluate_log_query(
            reader, tenant, query, start, end, limit=limit, backward=True,
            categorize=categorize))

    def _check_series(self, tenant: Scope, n: int) -> None:
        """`max_query_series` holds for /series as for metric results (a log result is
        bounded by its line limit; `| json` may give each line its own label set, which Loki
        answers)."""
        limit = self.limits.of(tenant).max_query_series
        if limit > 0 and n > limit:
            raise series_limit_error(limit)

    def _hiding(self) -> bool:
        """Whether retention or a delete request may hide whole streams from labels and
        series; if not, those come straight from the stream index."""
        return bool(self.retention is not None and self.retention.active
                    or self.deletions is not None and self.deletions.active)

    async def label_sets(self, tenant: Scope, groups: Sequence[Sequence[Matcher]], start: int,
                       end: int) -> list[dict[str, str]]:
        def run(reader: Reading) -> list[dict[str, str]]:
            with reader.snapshot():
                return list(reader.visible_streams(tenant, groups, start, end).values())
        return await self._read(tenant, run)

    async def label_names(self, tenant: Scope, start: int, end: int,
                          matchers: Sequence[Matcher] | None) -> list[str]:
        if self._hiding():
            sets = await self.label_sets(tenant, [matchers or ()], start, end)
            return sorted({name for labels in sets for name in labels})
        return await self._read(tenant, lambda reader: self.store.label_names(
            reader.inner, tenant, start, end, matchers))

    async def label_values(self, tenant: Scope, name: str, start: int, end: int,
                           matchers: Sequence[Matcher] | None) -> list[str]:
        if self._hiding():
            sets = await self.label_sets(tenant, [matchers or ()], start, end)
            return sorted({labels[name] for labels in sets if name in labels})
        return await self._read(tenant, lambda reader: self.store.label_values(
            reader.inner, tenant, name, start, end, matchers))

    async def series(self, tenant: Scope, groups: Sequence[Sequence[Matcher]], start: int,
                     end: int) -> list[str]:
        """The matching label sets, sorted, each as its JSON object text."""
        if self._hiding():
            found = [streams.labels_json(s) for s in sorted(
                await self.label_sets(tenant, groups, start, end), key=streams.canonical_labels)]
        else:
            found = await self._read(tenant, lambda reader: self.store.series_json(
                reader.inner, tenant, groups, start, end))
        self._check_series(tenant, len(found))
        return found

    async def index_stats(self, tenant: Scope, matchers: Sequence[Matcher], start: int,
                          end: int) -> dict[str, int]:
        return await self._read(tenant, lambda reader: volume_service.index_stats(
            reader, tenant, matchers, start, end))

    def check_volume_enabled(self, tenant: Scope) -> None:
        if not self.limits.of(tenant).volume_enabled:
            raise PlainError(404, "not found")

    async def volume(self, tenant: Scope, req: "volume_service.VolumeRequest"
                     ) -> tuple[str, list[dict[str, Any]]]:
        max_series = self.limits.of(tenant).volume_max_series
        return await self._read(tenant, lambda reader: volume_service.volume(
            reader, tenant, req, max_series))

    async def stream_ids(self, tenant: Scope, matchers: Sequence[Matcher], start: int,
                         end: int) -> tuple[list[int], list[tuple[int, int, str]]]:
        """The matching streams, and (stream, ts, line) of their lines in range that pending
        delete requests hide."""
        def run(reader: Reading) -> tuple[list[int], list[tuple[int, int, str]]]:
            with reader.snapshot():
                ids = list(reader.select_streams(tenant, matchers, start, end))
                return ids, list(reader.hidden_lines(ids, start, end))
        return await self._read(tenant, run)
