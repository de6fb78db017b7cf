"""Which of a tenant's lines have expired: the period of each stream (`retention_period`, or
the `retention_stream` rule that decides it), the oldest timestamp a read may still show,
and the table TTL that ClickHouse may apply (services/upkeep/compactor.py removes what
expired). Apart from the compactor's loop so that the query worker processes, which hide
expired lines from their reads, need not import the event loop's machinery.
"""

from __future__ import annotations

import time
import zlib
from typing import Any, Callable, Mapping

from config import LimitsConfig
from logql import parse_selector
from services.runtime.limits import Limits
from storage.clickhouse.ttl import TtlPlan
from storage.retention import StreamInfo

# a longer period is as good as forever for a table TTL (a DateTime ends in 2106)
TTL_MAX_NS = 50 * 365 * 86400 * 10**9


class RetentionPolicy:
    def __init__(self, enabled: bool, limits: Limits, clock: Callable[[], int] = time.time_ns):
        self.enabled = enabled  # compactor.retention_enabled
        self.clock = clock
        self.limits = limits
        self._compiled: dict[int, tuple[Any, int, list]] = {}

    def _rules_of(self, tenant: str) -> tuple[int, list]:
        limits = self.limits.of(tenant)
        hit = self._compiled.get(id(limits))
        if hit is None or hit[0] is not limits:
            rules = []
            for r in limits.retention_stream:
                rules.append((r.priority, len(r.selector), -r.period, r.period,
                              parse_selector(r.selector).matchers, r.selector))
            # best first: highest priority, then longest selector, then the shorter period
            rules.sort(key=lambda x: (x[0], x[1], x[2]), reverse=True)
            hit = (limits, limits.retention_period,
                   [(period, matchers, selector)
                    for _, _, _, period, matchers, selector in rules])
            self._compiled[id(limits)] = hit
        return hit[1], hit[2]

    def _rule_for(self, tenant: str, labels: dict[str, str]) -> tuple[int, str | None]:
        """(period, selector) of the `retention_stream` rule that decides the stream's
        period; the selector is None when none does (`retention_period`)."""
        default, rules = self._rules_of(tenant)
        for period, matchers, selector in rules:
            if all(m.matches(labels.get(m.name, "")) for m in matchers):
                return period, selector
        return default, None

    def period_of(self, tenant: str, labels: dict[str, str]) -> int:
        return self._rule_for(tenant, labels)[0]

    def rule_of(self, tenant: str, labels: dict[str, str]) -> int:
        """A number for the tenant's `retention_stream` rule that decides the stream's
        period, 0 when none does: what a line is stored with on ClickHouse, whose TTL then
        removes the lines of each rule after its period (storage/clickhouse/ttl.py)."""
        selector = self._rule_for(tenant, labels)[1]
        return 0 if selector is None else rule_number(tenant, selector)

    def cutoff_of(self, tenant: str, labels: dict[str, str],
                  now: int | None = None) -> int | None:
        """The oldest visible timestamp of a tenant's stream with these labels (None: all),
        at `now` (default: the clock's)."""
        if not self.enabled:
            return None
        period = self.period_of(tenant, labels)
        if period <= 0:
            return None
        return (self.clock() if now is None else now) - period

    def ttl_plan(self, delay: int, streams: Mapping[int, StreamInfo] | None = None
                 ) -> TtlPlan:
        """Which lines a table TTL may remove on ClickHouse, after their period and `delay`
        (storage/clickhouse/ttl.py): a tenant whose every stream expires, after its longest
        period; with the `streams` (ClickHouseRemoval.streams), the lines stored under each
        retention_stream rule, after the longest period any stream stored under it has now
        (a stream another rule governs now may have a longer one). None while retention is
        off."""
        if not self.enabled:
            return TtlPlan(None, {})
        return TtlPlan(_ttl_period(self.limits.defaults, delay),
                       {t: _ttl_period(lc, delay) for t, lc in self.limits.tenants.items()},
                       self._rule_periods(streams or {}, delay))

    def _rule_periods(self, streams: Mapping[int, StreamInfo], delay: int) -> dict[int, int]:
        keeps: dict[int, list[int]] = {}
        for info in streams.values():
            numbers = [n for n in info.rules if n]
            if not numbers:
                continue
            period = self.period_of(info.tenant, info.labels)
            # a stream kept forever keeps its rules' lines from any TTL
            keep = period + delay if 0 < period and period + delay < TTL_MAX_NS else 0
            for number in numbers:
                keeps.setdefault(number, []).append(keep)
        return {n: max(found) for n, found in keeps.items() if min(found) > 0}

    @property
    def active(self) -> bool:
        """Whether any tenant's lines expire (the overrides may change it while running)."""
        if not self.enabled:
            return False
        return any(lc.retention_period > 0 or any(r.period > 0 for r in lc.retention_stream)
                   for lc in self.limits.in_force())


def rule_number(tenant: str, selector: str) -> int:
    """1 to 2**31 - 1 for a tenant's rule, from its selector: the same on every node and
    after a restart. Two rules that share one (1 in 2 billion) share a TTL rule: the longer
    of their periods, the other's streams then removed by DELETEs."""
    return (zlib.crc32(f"{tenant}\x00{selector}".encode()) & 0x7FFFFFFF) or 1


def _ttl_period(limits: LimitsConfig, delay: int) -> int | None:
    periods = [limits.retention_period, *(r.period for r in limits.retention_stream)]
    if min(periods) <= 0 or max(periods) + delay >= TTL_MAX_NS:
        return None  # some streams keep their lines forever
    return max(periods) + delay
