"""Bytes of push bodies held in memory at once, across every tenant: Loki's distributor
`max_inflight_bytes`. Each push counts what it has read of its body and, as it inflates,
what it has inflated; past the limit it is answered 503 (Loki's text), which Promtail, Alloy
and the OTLP exporters retry later, instead of the process growing with every concurrent
large body. Each body alone is already bounded by `max_recv_msg_size` and
`max_decompressed_size`; this bounds their sum.

Every push decodes on the event loop, so the counter needs no lock: nothing else runs
between a check and its addition."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from services.runtime.errors import PlainError
from services.runtime.metrics import ScrapeCollector, counter, gauge

BUSY = "The server cannot accept more requests at this time."


class InflightBytes:
    def __init__(self, limit: int):
        self.limit = limit  # 0: no limit, as in Loki
        self.total = 0
        self.refused = 0
        self.pushes = 0  # pushes being read, decoded or written: each holds a share

    @contextmanager
    def hold(self) -> Iterator["Held"]:
        """One push's share; given back when the push is answered."""
        held = Held(self)
        self.pushes += 1
        try:
            yield held
        finally:
            self.pushes -= 1
            self.total -= held.bytes


class Held:
    __slots__ = ("budget", "bytes")

    def __init__(self, budget: InflightBytes):
        self.budget = budget
        self.bytes = 0

    def add(self, n: int) -> None:
        b = self.budget
        if b.limit and b.total + n > b.limit:
            b.refused += 1
            raise PlainError(503, BUSY, newline=True)
        b.total += n
        self.bytes += n


def collector(budget: InflightBytes) -> ScrapeCollector:
    return ScrapeCollector(
        gauge("logstore_distributor_inflight_bytes",
              "Bytes of push bodies (read and inflated) held right now.", lambda: budget.total),
        counter("logstore_distributor_inflight_refused",
                "Pushes answered 503 because distributor.max_inflight_bytes was reached.",
                lambda: budget.refused))
