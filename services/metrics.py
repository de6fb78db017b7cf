"""Prometheus metrics of one logstore instance (its own registry: tests run many apps)."""

from __future__ import annotations

from typing import Callable

from prometheus_client import (CollectorRegistry, Counter, Gauge, GCCollector, Histogram,
                               PlatformCollector, ProcessCollector)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class _StorageCollector:
    """Read at scrape time from the database object: no bookkeeping on the write path."""

    def __init__(self, size: Callable[[], int], commits: Callable[[], int]):
        self._size = size
        self._commits = commits

    def collect(self):
        yield GaugeMetricFamily("logstore_sqlite_size_bytes",
                                "Bytes on disk of the SQLite database, WAL included.",
                                value=self._size())
        yield CounterMetricFamily("logstore_writer_commits",
                                  "Group-commit transactions committed by the writer.",
                                  value=self._commits())


class Metrics:
    def __init__(self, db_size: Callable[[], int], db_commits: Callable[[], int] = lambda: 0,
                 build: dict[str, str] | None = None):
        self.registry = CollectorRegistry()
        # Prometheus convention: a constant 1 whose labels say which build is running
        build = build or {}
        Gauge("logstore_build_info", "A metric with a constant '1' value labeled by version, "
              "revision, branch and pythonversion from which logstore was built.",
              list(build), registry=self.registry).labels(**build).set(1)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.registry.register(_StorageCollector(db_size, db_commits))
        self.lines = Counter("logstore_distributor_lines_received",
                             "Log lines accepted by push, per tenant.", ["tenant"],
                             registry=self.registry)
        self.bytes = Counter("logstore_distributor_bytes_received",
                             "Bytes of log lines accepted by push, per tenant.", ["tenant"],
                             registry=self.registry)
        self.requests = Histogram("logstore_request_duration_seconds",
                                  "Time spent serving HTTP requests.",
                                  ["route", "method", "status_code"], registry=self.registry)

    def observe_push(self, tenant: str, lines: int, size: int, seconds: float) -> None:
        if lines:
            self.lines.labels(tenant).inc(lines)
            self.bytes.labels(tenant).inc(size)

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).observe(seconds)
