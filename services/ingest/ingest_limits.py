"""Per-tenant ingest limits with Loki's texts and 429s (spec/http-api.md section 2.4 step 5):
the tenant's ingestion rate (`ingestion_rate_mb`, burst `ingestion_burst_size_mb`: a token
bucket over the bytes of the lines; a push that does not fit is refused whole),
the per-stream rate (`per_stream_rate_limit`, burst `per_stream_rate_limit_burst`: that
stream's entries are refused), and the number of active streams
(`max_global_streams_per_user`, or `max_streams_per_user`: a new stream beyond it is
refused). A stream is active while pushed to in the last 30 minutes, as Loki's ingesters keep
a stream until it has been idle that long. All limits are per tenant (runtime overrides
apply) and off at 0."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from services.runtime.metrics import ScrapeCollector, counter, gauge

MB = 1024 * 1024
IDLE_NS = 30 * 60 * 10**9
RATE_TEXT = ("ingestion rate limit exceeded for user {tenant} (limit: {limit} bytes/sec) while "
             "attempting to ingest '{lines}' lines totaling '{bytes}' bytes, reduce log volume "
             "or contact your Loki administrator to see if the limit can be increased")
STREAM_RATE_TEXT = ("Per stream rate limit exceeded (limit: {limit}/sec) while attempting to "
                    "ingest for stream '{labels}' totaling {bytes}, consider splitting a stream "
                    "via additional labels or contact your Loki administrator to see if the "
                    "limit can be increased")
STREAMS_TEXT = ("maximum active stream limit exceeded when trying to create stream {labels}, "
                "reduce the number of active streams (reduce labels or reduce label values), or "
                "contact your Loki administrator to see if the limit can be increased, "
                "user: '{tenant}'")


def byte_size(n: int) -> str:
    """dskit's ByteSize: the largest 1024-based unit that divides exactly (3MB, 1500B)."""
    for unit, size in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


@dataclass
class Bucket:
    rate: float     # bytes per second
    burst: float
    tokens: float
    at: float

    def allow(self, n: int, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if n > self.tokens:
            return False
        self.tokens -= n
        return True


class IngestLimits:
    def __init__(self, limits_of: Callable[[str], Any],
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], int] = time.time_ns):
        self.limits_of = limits_of
        self.clock = clock
        self.wall = wall
        self._tenants: dict[str, Bucket] = {}
        self._streams: dict[tuple[str, str], Bucket] = {}
        # tenant -> canonical -> last push ns, the least recently pushed first
        self._active: dict[str, OrderedDict[str, int]] = {}
        # (tenant, reason) -> [lines, bytes]: what these limits refused, and what push's
        # validation refused (Ingester.push counts those here: one table for /metrics)
        self.discarded: dict[tuple[str, str], list[int]] = {}

    def _bucket(self, table: dict, key: Any, rate: float, burst: float) -> Bucket:
        b = table.get(key)
        if b is None or b.rate != rate or b.burst != burst:
            b = table[key] = Bucket(rate, burst, burst, self.clock())
        return b

    def count_discarded(self, tenant: str, reason: str, lines: int, size: int) -> None:
        acc = self.discarded.setdefault((tenant, reason), [0, 0])
        acc[0] += lines
        acc[1] += size

    def active_streams(self) -> list[tuple[list[str], int]]:
        """(tenant, streams pushed to within the idle period) for every tenant."""
        since = self.wall() - IDLE_NS
        return [([tenant], sum(1 for seen in streams.values() if seen >= since))
                for tenant, streams in sorted(self._active.items())]

    def check_tenant(self, tenant: str, lines: int, size: int) -> str | None:
        """The 429 text when the whole push is over the tenant's rate, else None."""
        lim = self.limits_of(tenant)
        if lim.ingestion_rate_mb <= 0 or size == 0:
            return None
        rate = lim.ingestion_rate_mb * MB
        burst = max(lim.ingestion_burst_size_mb * MB, rate)
        if self._bucket(self._tenants, tenant, rate, burst).allow(size, self.clock()):
            return None
        self.count_discarded(tenant, "rate_limited", lines, size)
        return RATE_TEXT.format(tenant=tenant, limit=int(rate), lines=lines, bytes=size)

    def check_streams(self, tenant: str, streams: Iterable[tuple[str, int, int]]
                      ) -> list[str | None]:
        """For each stream of a push (canonical labels, lines, bytes): the 429 text when it
        may not take these entries, else None.

        A tenant's active streams are kept in the order they were last pushed to, so the
        idle ones leave from the front: the work is per stream pushed, not per stream held.
        Looking through every active stream for idle ones at each new stream made a push of
        20,000 new streams under a raised limit spend 17 s here (issue 22)."""
        lim = self.limits_of(tenant)
        now, at = self.wall(), self.clock()
        active = self._active.get(tenant)
        if active is None:
            active = self._active[tenant] = OrderedDict()
        self._forget_idle(tenant, active, now, at)
        limit = lim.max_global_streams_per_user or lim.max_streams_per_user
        per_stream = lim.per_stream_rate_limit
        if per_stream > 0:
            rate, burst = float(per_stream), float(max(lim.per_stream_rate_limit_burst,
                                                       per_stream))
        texts: list[str | None] = []
        for canonical, lines, size in streams:
            if limit > 0 and canonical not in active and len(active) >= limit:
                self.count_discarded(tenant, "stream_limit", lines, size)
                texts.append(STREAMS_TEXT.format(labels=canonical, tenant=tenant))
                continue
            if per_stream > 0 and not self._bucket(self._streams, (tenant, canonical), rate,
                                                   burst).allow(size, at):
                self.count_discarded(tenant, "per_stream_rate_limit", lines, size)
                texts.append(STREAM_RATE_TEXT.format(limit=byte_size(per_stream),
                                                     labels=canonical, bytes=byte_size(size)))
                continue
            active[canonical] = now
            active.move_to_end(canonical)  # a stream pushed again goes to the back
            texts.append(None)
        return texts

    def _forget_idle(self, tenant: str, active: OrderedDict[str, int], now: int,
                     at: float) -> None:
        """Streams not pushed to for IDLE_NS (wall clock `now`) leave the active ones, and
        their rate buckets once full again at `at` (a full bucket is what a new stream
        gets)."""
        while active:
            canonical, seen = next(iter(active.items()))
            if now - seen <= IDLE_NS:
                return
            del active[canonical]
            bucket = self._streams.get((tenant, canonical))
            if bucket is not None and \
                    bucket.tokens + (at - bucket.at) * bucket.rate >= bucket.burst:
                del self._streams[(tenant, canonical)]


def collector(limits: IngestLimits) -> ScrapeCollector:
    def discarded(pick: int) -> Callable[[], list]:
        return lambda: [([reason, tenant], counts[pick])
                        for (tenant, reason), counts in sorted(limits.discarded.items())]

    lines = "Lines push refused (an ingest limit or validation), by Loki's reason."
    size = "Bytes of the lines push refused (an ingest limit or validation), by Loki's reason."
    # the same numbers under Loki's names, which loki-mixin's panels read
    return ScrapeCollector(
        counter("logstore_discarded_samples", lines, discarded(0), labels=["reason", "tenant"]),
        counter("logstore_discarded_bytes", size, discarded(1), labels=["reason", "tenant"]),
        counter("loki_discarded_samples", lines, discarded(0), labels=["reason", "tenant"]),
        counter("loki_discarded_bytes", size, discarded(1), labels=["reason", "tenant"]),
        gauge("loki_ingester_memory_streams",
              "Streams pushed to in the last 30 minutes, per tenant (Loki's ingesters keep a "
              "stream in memory that long).", limits.active_streams, labels=["tenant"]))
