"""The state several logstore nodes share (docs/scale-out.md): rule groups and alerts, delete
requests, patterns, Grafana's objects, the leases of once-per-cluster work, and (on
PostgreSQL only) the runtime configuration's text (`runtime_config.py`). One node keeps
it in its data directory's SQLite file (`storage.db.Database`); nodes of a cluster keep it in
PostgreSQL (`storage.shared.postgres.PostgresState`). Both offer `SharedState`, and the
storage modules that hold this state (storage/grafana, rules, deletes, patterns) are written
once, in the SQLite dialect the PostgreSQL connection translates."""

from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar

T = TypeVar("T")

# how often a node of a cluster re-reads what the others write and it holds in memory: the
# rule groups (and, where it does not evaluate them, their alerts) and the delete requests
REFRESH_SECONDS = 5.0


class SharedState(Protocol):
    async def read(self, fn: Callable[..., T], *args: Any) -> T: ...

    async def write(self, fn: Callable[[Any], T]) -> T: ...

    def read_sync(self, fn: Callable[..., T], *args: Any) -> T: ...

    def write_sync(self, fn: Callable[[Any], T]) -> T: ...

    async def probe(self) -> str | None:
        """Why the shared state cannot be used now (/ready says so), None when it can."""
        ...


class Leases(Protocol):
    node: str

    async def holds(self, name: str) -> bool: ...

    async def release_all(self) -> None: ...
