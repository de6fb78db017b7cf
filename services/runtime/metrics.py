"""Prometheus metrics of one logstore instance (its own registry: tests run many apps)."""

from __future__ import annotations

from typing import Any, Callable, Iterator, NamedTuple, Sequence

from prometheus_client import (CollectorRegistry, Counter, Gauge, GCCollector, Histogram,
                               PlatformCollector, ProcessCollector, disable_created_metrics)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

# a `*_created` series beside every counter and histogram doubled the families Prometheus
# scrapes and matches none of Loki's (issue 27); Loki exports none
disable_created_metrics()


class Family(NamedTuple):
    """A family read at each scrape: `read()` gives its value or, with `labels`, its
    (label values, value) pairs; None leaves the family out of that scrape."""
    kind: type
    name: str
    help: str
    read: Callable[[], Any]
    labels: Sequence[str] = ()


def counter(name: str, help_text: str, read: Callable[[], Any],
            labels: Sequence[str] = ()) -> Family:
    return Family(CounterMetricFamily, name, help_text, read, labels)


def gauge(name: str, help_text: str, read: Callable[[], Any],
          labels: Sequence[str] = ()) -> Family:
    return Family(GaugeMetricFamily, name, help_text, read, labels)


class ScrapeCollector:
    """Numbers read at scrape time from the objects that keep them, so the hot paths (push,
    reads, sealing) do no metrics bookkeeping of their own."""

    def __init__(self, *families: Family):
        self.families = families

    def collect(self) -> Iterator[Metric]:
        for f in self.families:
            got = f.read()
            if got is None:
                continue
            if not f.labels:
                yield f.kind(f.name, f.help, value=got)
                continue
            family = f.kind(f.name, f.help, labels=list(f.labels))
            for label_values, value in got:
                family.add_metric(list(label_values), value)
            yield family


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
        self.registry.register(ScrapeCollector(
            gauge("logstore_sqlite_size_bytes",
                  "Bytes on disk of the SQLite database, WAL included.", db_size),
            counter("logstore_writer_commits",
                    "Group-commit transactions committed by the writer.", db_commits)))
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
