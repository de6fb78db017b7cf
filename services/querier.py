"""The read service: LogQL queries, labels, values and series, and the tail's history.

Routes hand it parsed requests and encode what it returns; it runs each read on a reader
thread through the storage boundary (`storage.reader.LogReader`), under one deadline
(`limits_config.query_timeout`) for log and metric queries alike. Failures are typed
(`logql.errors.QueryError`, `ParseError`, `storage.scan.QueryTimeout`); the HTTP status for
each is chosen once, in routes/errors.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from config import LimitsConfig
from logql.syntax import ast as A
from logql.engine.logs import evaluate_log_query
from logql.engine.common import series_limit_error
from logql.engine.metrics import evaluate_metric
from logql.engine.results import QueryStats
from services import volume as volume_service
from storage import streams
from storage.db import Database
from storage.reader import LogReader
from storage.streams import Matcher, TenantSet

Scope = str | TenantSet


@dataclass
class QueryResult:
    result_type: str   # streams | vector | matrix | scalar
    result: Any        # JSON-ready, as http-api.md §4 shows it
    stats: QueryStats


class Querier:
    def __init__(self, db: Database, limits: LimitsConfig):
        self.db = db
        self.limits = limits
        # retention (services/compactor.py): the oldest visible timestamp of a stream, by
        # tenant and labels
        self.cutoff_of: Callable[[str, dict[str, str]], int | None] | None = None
        self.retention_active: Callable[[], bool] = lambda: False
        # log deletion (services/deletes.py): what pending delete requests hide, per stream
        self.deletes_of: Callable[[str, dict[str, str]], list] | None = None
        self.deletes_pending: Callable[[], bool] = lambda: False

    def _deadline(self, began: float) -> float | None:
        timeout = self.limits.query_timeout
        return began + timeout / 1e9 if timeout > 0 else None

    async def query(self, tenant: Scope, expr: Any, *, start: int, end: int, limit: int,
                    backward: bool, interval: int = 0, step: int = 0, instant: bool = False,
                    categorize: bool = False, queue_time: float = 0.0) -> QueryResult:
        """A parsed log or metric query over [start, end] (a metric instant query at `end`)."""
        stats = QueryStats(queue_time=queue_time)
        submitted = time.monotonic()

        def run(conn: Any) -> QueryResult:
            began = time.monotonic()
            stats.queue_time += began - submitted
            reader = LogReader(conn, self._deadline(began), self.cutoff_of, self.deletes_of)
            if isinstance(expr, A.LogQuery):
                result = evaluate_log_query(reader, tenant, expr, start, end, limit=limit,
                                            backward=backward, interval_ns=interval,
                                            categorize=categorize, stats=stats)
                return QueryResult("streams", result, stats)
            out = evaluate_metric(reader, tenant, expr, start_ns=start, end_ns=end,
                                  step_ns=step, instant=instant, limits=self.limits,
                                  stats=stats)
            return QueryResult(out.result_type, out.result, stats)

        return await self.db.read(run)

    async def history(self, tenant: str, query: A.LogQuery, start: int, end: int, limit: int,
                      categorize: bool) -> list[dict]:
        """The newest `limit` entries a tail sends first."""
        if start >= end:
            return []
        return await self.db.read(lambda conn: evaluate_log_query(
            LogReader(conn, self._deadline(time.monotonic()), self.cutoff_of, self.deletes_of),
            tenant, query,
            start, end, limit=limit, backward=True, categorize=categorize))

    def _check_series(self, n: int) -> None:
        """`max_query_series` holds for /series as for metric results (a log result is
        bounded by its line limit; `| json` may give each line its own label set, which Loki
        answers)."""
        limit = self.limits.max_query_series
        if limit > 0 and n > limit:
            raise series_limit_error(limit)

    def _hiding(self) -> bool:
        """Whether retention or a delete request may hide whole streams from labels and
        series; if not, those come straight from the stream index."""
        return self.retention_active() or self.deletes_pending()

    async def label_sets(self, tenant: Scope, groups: Sequence[Sequence[Matcher]], start: int,
                       end: int) -> list[dict[str, str]]:
        def run(conn: Any) -> list[dict[str, str]]:
            reader = LogReader(conn, self._deadline(time.monotonic()), self.cutoff_of,
                               self.deletes_of)
            with reader.snapshot():
                return list(reader.visible_streams(tenant, groups, start, end).values())
        return await self.db.read(run)

    async def label_names(self, tenant: Scope, start: int, end: int,
                          matchers: Sequence[Matcher] | None) -> list[str]:
        if self._hiding():
            sets = await self.label_sets(tenant, [matchers or ()], start, end)
            return sorted({name for labels in sets for name in labels})
        return await self.db.read(streams.label_names, tenant, start, end, matchers)

    async def label_values(self, tenant: Scope, name: str, start: int, end: int,
                           matchers: Sequence[Matcher] | None) -> list[str]:
        if self._hiding():
            sets = await self.label_sets(tenant, [matchers or ()], start, end)
            return sorted({labels[name] for labels in sets if name in labels})
        return await self.db.read(streams.label_values, tenant, name, start, end, matchers)

    async def series(self, tenant: Scope, groups: Sequence[Sequence[Matcher]], start: int,
                     end: int) -> list[dict[str, str]]:
        if self._hiding():
            found = sorted(await self.label_sets(tenant, groups, start, end),
                           key=streams.canonical_labels)
        else:
            found = await self.db.read(streams.series, tenant, groups, start, end)
        self._check_series(len(found))
        return found

    def _reader(self, conn: Any) -> LogReader:
        return LogReader(conn, self._deadline(time.monotonic()), self.cutoff_of,
                         self.deletes_of)

    async def index_stats(self, tenant: Scope, matchers: Sequence[Matcher], start: int,
                          end: int) -> dict[str, int]:
        return await self.db.read(lambda conn: volume_service.index_stats(
            self._reader(conn), tenant, matchers, start, end))

    async def volume(self, tenant: Scope, req: "volume_service.VolumeRequest",
                     max_series: int) -> tuple[str, list[dict[str, Any]]]:
        return await self.db.read(lambda conn: volume_service.volume(
            self._reader(conn), tenant, req, max_series))

    async def stream_ids(self, tenant: Scope, matchers: Sequence[Matcher], start: int,
                         end: int) -> tuple[list[int], list[tuple[int, int, str]]]:
        """The matching streams, and (stream, ts, line) of their lines in range that pending
        delete requests hide."""
        def run(conn: Any) -> tuple[list[int], list[tuple[int, int, str]]]:
            reader = self._reader(conn)
            with reader.snapshot():
                ids = list(reader.select_streams(tenant, matchers, start, end))
                return ids, list(reader.hidden_lines(ids, start, end))
        return await self.db.read(run)
