"""How many reads run at once: per tenant, and for the whole process.

Every read the querier runs (log and metric queries, labels, series, stats, volume, the
tail's history, the ruler's queries) passes here first. A tenant has at most
`limits_config.max_query_parallelism` reads running and, counting those waiting,
`query_scheduler.max_outstanding_requests_per_tenant` in flight; one more is answered 429
`too many outstanding requests`, as Loki's scheduler answers. The process runs at most
`querier.max_concurrent` reads at once (the reader pool's size bounds it too): reads are
Python work under one GIL, so more of them at once only make each one, and the pushes
waiting for the GIL, slower.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from services.runtime.metrics import ScrapeCollector, counter, gauge

TOO_MANY_OUTSTANDING = "too many outstanding requests"


class TooManyOutstanding(Exception):
    """More reads in flight for one tenant than the scheduler queues (HTTP 429)."""

    def __init__(self) -> None:
        super().__init__(TOO_MANY_OUTSTANDING)


class _Tenant:
    __slots__ = ("outstanding", "running", "waiters")

    def __init__(self) -> None:
        self.outstanding = 0
        self.running = 0
        self.waiters: list[asyncio.Future] = []


class QueryGate:
    def __init__(self, max_concurrent: int, max_outstanding: int,
                 parallelism_of: Callable[[str], int]):
        self.max_outstanding = max_outstanding
        self.parallelism_of = parallelism_of
        self.max_concurrent = max_concurrent
        self._global: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tenants: dict[str, _Tenant] = {}
        self.refused = 0

    def outstanding(self, tenant: str) -> int:
        state = self._tenants.get(tenant)
        return state.outstanding if state else 0

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        """Wait for the tenant's turn and a process-wide slot; 429 if too many wait."""
        state = self._tenants.get(tenant)
        if state is None:
            state = self._tenants[tenant] = _Tenant()
        if self.max_outstanding > 0 and state.outstanding >= self.max_outstanding:
            self.refused += 1
            raise TooManyOutstanding()
        state.outstanding += 1
        try:
            await self._tenant_turn(tenant, state)
            try:
                running = self._running_slots()
                if running is None:
                    yield
                else:
                    async with running:
                        yield
            finally:
                state.running -= 1
                self._wake(state)
        finally:
            state.outstanding -= 1
            if state.outstanding == 0 and not state.waiters:
                self._tenants.pop(tenant, None)

    def _running_slots(self) -> asyncio.Semaphore | None:
        if self.max_concurrent <= 0:
            return None
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a semaphore belongs to the loop that first waits on it
            self._loop, self._global = loop, asyncio.Semaphore(self.max_concurrent)
        return self._global

    async def _tenant_turn(self, tenant: str, state: _Tenant) -> None:
        # the limit is read at every admission so a runtime override takes effect at once
        while True:
            limit = self.parallelism_of(tenant)
            if limit <= 0 or state.running < limit:
                state.running += 1
                return
            waiter = asyncio.get_running_loop().create_future()
            state.waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                state.waiters.remove(waiter)
                if waiter.done() and not waiter.cancelled():
                    self._wake(state)  # woken, then cancelled: the turn passes on
                raise
            state.waiters.remove(waiter)

    @staticmethod
    def _wake(state: _Tenant) -> None:
        for waiter in state.waiters:
            if not waiter.done():
                waiter.set_result(None)
                return


def gate_collector(gate: QueryGate, querier: Any) -> ScrapeCollector:
    """The gate and the querier in /metrics."""
    return ScrapeCollector(
        gauge("logstore_query_reads_running", "Reads running on reader threads now.",
              lambda: querier.reads_running),
        counter("logstore_query_reads_cancelled", "Reads stopped because their client went away.",
                lambda: querier.reads_cancelled),
        counter("logstore_query_scheduler_discarded_requests",
                "Reads refused 429: too many outstanding for the tenant.", lambda: gate.refused))
