"""How a read sees storage: the SQLite reader under the tenant's deadline, wrapped in what
retention, the lookback and pending delete requests hide.

`Visibility` is that as plain data (the tenants' limits, whether retention is on, the
pending delete pieces), so that a read evaluated in a query worker process
(services/read/query_pool.py) is built by the same `reader_for` as one on a reader thread
of the server, and hides exactly the same lines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol, Sequence, TypeVar

from services.read.visibility import VisibleReader
from services.runtime.limits import Limits
from services.upkeep.retention_policy import RetentionPolicy
from services.upkeep.delete_filters import ActiveFilter, filters_matching
from storage import streams
from storage.reader import LogReader
from storage.streams import Matcher, TenantSet

Scope = str | TenantSet
Reading = VisibleReader[LogReader]
T = TypeVar("T")


class LogStore(Protocol):
    """Where the querier's reads go: a thread to read on, the engine's `Reader` over what
    that thread holds, and the stream index's answers for labels and series when nothing
    is hidden. SQLite (`SqliteLogs`) or ClickHouse (storage/clickhouse/store.py)."""

    def read(self, fn: Callable[[Any], T]) -> Awaitable[T]: ...

    def reader(self, conn: Any, deadline: float | None) -> Any: ...

    def label_names(self, inner: Any, tenant: Scope, start: int, end: int,
                    matchers: Sequence[Matcher] | None) -> list[str]: ...

    def label_values(self, inner: Any, tenant: Scope, name: str, start: int, end: int,
                     matchers: Sequence[Matcher] | None) -> list[str]: ...

    def series_json(self, inner: Any, tenant: Scope, groups: Sequence[Sequence[Matcher]],
                    start: int, end: int) -> list[str]: ...

    async def probe(self) -> str | None:
        """Why the store cannot serve now (/ready), None when it can."""
        ...


class SqliteLogs:
    """The data directory's SQLite file: a reader connection of the pool per read."""

    def __init__(self, db: Any):
        self.db = db

    def read(self, fn: Callable[[Any], T]) -> Awaitable[T]:
        return self.db.read(fn)

    def reader(self, conn: Any, deadline: float | None) -> LogReader:
        return LogReader(conn, deadline)

    async def probe(self) -> str | None:
        return None  # a file of this host: its writer's state is the ingester's to report

    def label_names(self, inner: LogReader, tenant: Scope, start: int, end: int,
                    matchers: Sequence[Matcher] | None) -> list[str]:
        return streams.label_names(inner.conn, tenant, start, end, matchers)

    def label_values(self, inner: LogReader, tenant: Scope, name: str, start: int, end: int,
                     matchers: Sequence[Matcher] | None) -> list[str]:
        return streams.label_values(inner.conn, tenant, name, start, end, matchers)

    def series_json(self, inner: LogReader, tenant: Scope,
                    groups: Sequence[Sequence[Matcher]], start: int, end: int) -> list[str]:
        return streams.series_json(inner.conn, tenant, groups, start, end)


@dataclass(frozen=True)
class Visibility:
    limits: Limits                       # at least the limits of the read's tenants
    retention: bool                      # compactor.retention_enabled
    deletes: tuple[ActiveFilter, ...]    # pending pieces of the read's tenants
    now: int = 0                         # the retention clock when the read began


def tenants_of(scope: Scope) -> tuple[str, ...]:
    return (scope,) if isinstance(scope, str) else tuple(scope)


def limits_snapshot(limits: Limits, scope: Scope) -> Limits:
    """Just the limits a read of `scope` consults: what a worker process is sent."""
    snap = Limits(limits.defaults)
    snap.tenants = {t: limits.tenants[t] for t in tenants_of(scope) if t in limits.tenants}
    return snap


def reader_for(conn: Any, scope: Scope, vis: Visibility, began: float,
               policy: RetentionPolicy | None = None,
               store: LogStore | None = None) -> Reading:
    """The reader a read of `scope` that began at `began` (time.monotonic) goes through.
    `policy`: the server's own retention policy (its compiled rules are kept between
    reads); a worker builds one from `vis`."""
    limits = vis.limits.of(scope)
    deadline = began + limits.query_timeout / 1e9 if limits.query_timeout > 0 else None
    cutoff_of: Callable[[str, dict[str, str]], int | None] | None = None
    if vis.retention:
        if policy is None:
            policy = RetentionPolicy(True, vis.limits, clock=lambda: vis.now)
        cutoff_of = policy.cutoff_of
    if limits.max_query_lookback > 0:
        # nothing older than the lookback is read, whatever the range asks (Loki's
        # querier clamps every selection the same way); retention may cut later still
        floor = time.time_ns() - limits.max_query_lookback
        retention = cutoff_of

        def cutoff_of(own: str, labels: dict[str, str]) -> int:
            cut = retention(own, labels) if retention is not None else None
            return floor if cut is None else max(cut, floor)
    deletes_of = None
    if vis.deletes:
        # without a pending delete request there is nothing to ask per stream: a read that
        # only counts (stats) then never needs the streams' label sets
        by_tenant: dict[str, list[ActiveFilter]] = {}
        for f in vis.deletes:
            by_tenant.setdefault(f.tenant, []).append(f)

        def deletes_of(own: str, labels: dict[str, str]) -> list:
            return filters_matching(by_tenant.get(own, ()), labels)
    inner = LogReader(conn, deadline) if store is None else store.reader(conn, deadline)
    return VisibleReader(inner, cutoff_of, deletes_of)
