"""Prometheus metrics of one logstore instance (its own registry: tests run many apps).

prometheus_client is imported where a registry is built or a scrape runs, not with this
module: the services that declare their collectors here are also imported by the query
workers, which never scrape, and prometheus_client (with the http.server it brings) was
2.8 MB of each worker's memory."""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple, Sequence

if TYPE_CHECKING:
    from prometheus_client.core import Metric


class Family(NamedTuple):
    """A family read at each scrape: `read()` gives its value or, with `labels`, its
    (label values, value) pairs; None leaves the family out of that scrape."""
    kind: str  # "counter" or "gauge"
    name: str
    help: str
    read: Callable[[], Any]
    labels: Sequence[str] = ()


def counter(name: str, help_text: str, read: Callable[[], Any],
            labels: Sequence[str] = ()) -> Family:
    return Family("counter", name, help_text, read, labels)


def gauge(name: str, help_text: str, read: Callable[[], Any],
          labels: Sequence[str] = ()) -> Family:
    return Family("gauge", name, help_text, read, labels)


class ScrapeCollector:
    """Numbers read at scrape time from the objects that keep them, so the hot paths (push,
    reads, sealing) do no metrics bookkeeping of their own."""

    def __init__(self, *families: Family):
        self.families = families

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        kinds = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily}
        for f in self.families:
            got = f.read()
            if got is None:
                continue
            kind = kinds[f.kind]
            if not f.labels:
                yield kind(f.name, f.help, value=got)
                continue
            family = kind(f.name, f.help, labels=list(f.labels))
            for label_values, value in got:
                family.add_metric(list(label_values), value)
            yield family


# Loki's request duration buckets (dskit's instrument.DefBuckets): its recording rules and
# latency panels read these bounds
DURATION_BUCKETS = (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 25, 50, 100)
_BOUNDS = tuple(str(float(b)) for b in DURATION_BUCKETS) + ("+Inf",)


class RequestDurations:
    """One histogram of HTTP request durations, exported twice at scrape time:
    `logstore_request_duration_seconds{route,method,status_code}` and Loki's
    `loki_request_duration_seconds{method,route,status_code,ws}`, which loki-mixin's panels,
    recording rules and alerts read.

    Kept as plain lists rather than a prometheus_client Histogram: `observe` runs for every
    request, on the event loop thread only (no lock needed), and is a dict lookup, a bisect
    and two additions."""

    def __init__(self) -> None:
        # (route, method, status) -> requests per bucket (the last one +Inf), then their sum
        self.series: dict[tuple[str, str, int], list] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        counts = self.series.get(key)
        if counts is None:
            counts = self.series[key] = [0] * (len(_BOUNDS) + 1)
        counts[bisect_left(DURATION_BUCKETS, seconds)] += 1
        counts[-1] += seconds

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import HistogramMetricFamily
        ours = HistogramMetricFamily("logstore_request_duration_seconds",
                                     "Time spent serving HTTP requests.",
                                     labels=["route", "method", "status_code"])
        loki = HistogramMetricFamily("loki_request_duration_seconds",
                                     "Time spent serving HTTP requests, as Loki names it.",
                                     labels=["method", "route", "status_code", "ws"])
        for (route, method, status), counts in sorted(self.series.items()):
            buckets = list(zip(_BOUNDS, accumulate(counts[:-1])))
            status_code = str(status)
            ours.add_metric([route, method, status_code], buckets, counts[-1])
            # WebSocket tails are not timed (their duration is the connection's): ws is false
            loki.add_metric([method, route, status_code, "false"], buckets, counts[-1])
        yield ours
        yield loki


class PushCounts:
    """Lines and bytes accepted by push, per tenant, under logstore's and Loki's names."""

    def __init__(self) -> None:
        self.tenants: dict[str, list[int]] = {}   # tenant -> [lines, bytes]

    def add(self, tenant: str, lines: int, size: int) -> None:
        acc = self.tenants.get(tenant)
        if acc is None:
            acc = self.tenants[tenant] = [0, 0]
        acc[0] += lines
        acc[1] += size

    def collector(self) -> ScrapeCollector:
        def read(pick: int) -> Callable[[], list]:
            return lambda: [([tenant], acc[pick]) for tenant, acc in sorted(self.tenants.items())]

        lines = "Log lines accepted by push, per tenant."
        size = "Bytes of log lines accepted by push, per tenant."
        return ScrapeCollector(
            counter("logstore_distributor_lines_received", lines, read(0), ["tenant"]),
            counter("logstore_distributor_bytes_received", size, read(1), ["tenant"]),
            counter("loki_distributor_lines_received", lines, read(0), ["tenant"]),
            counter("loki_distributor_bytes_received", size, read(1), ["tenant"]))


class Metrics:
    def __init__(self, db_size: Callable[[], int], db_commits: Callable[[], int], *,
                 build: dict[str, str], loki_build: dict[str, str]):
        from prometheus_client import (CollectorRegistry, Gauge, GCCollector,
                                       PlatformCollector, ProcessCollector,
                                       disable_created_metrics)
        # a `*_created` series beside every counter and histogram doubled the families
        # Prometheus scrapes and matches none of Loki's (issue 27); Loki exports none
        disable_created_metrics()
        self.registry = CollectorRegistry()
        # Prometheus convention: a constant 1 whose labels say which build is running
        Gauge("logstore_build_info", "A metric with a constant '1' value labeled by version, "
              "revision, branch and pythonversion from which logstore was built.",
              list(build), registry=self.registry).labels(**build).set(1)
        # the Loki version logstore answers as (what buildinfo reports); loki-mixin's
        # dashboards list their clusters and namespaces from this family
        Gauge("loki_build_info", "A metric with a constant '1' value labeled by version, "
              "revision, branch and goversion of the Loki API logstore answers as.",
              list(loki_build), registry=self.registry).labels(**loki_build).set(1)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.pushes = PushCounts()
        self.requests = RequestDurations()
        self.internal_errors = 0   # routes/errors.py counts every unexpected exception
        errors = "Requests failed by an unexpected exception (answered 500 with a request id)."
        self.registry.register(ScrapeCollector(
            gauge("logstore_sqlite_size_bytes",
                  "Bytes on disk of the SQLite database, WAL included.", db_size),
            counter("logstore_writer_commits",
                    "Group-commit transactions committed by the writer.", db_commits),
            counter("logstore_internal_errors", errors, lambda: self.internal_errors),
            # what loki-mixin's LokiRequestPanics alert watches: Go's recovered panics are
            # what an unexpected exception is here
            counter("loki_panic", errors, lambda: self.internal_errors)))
        self.registry.register(self.pushes.collector())
        self.registry.register(self.requests)

    def observe_push(self, tenant: str, lines: int, size: int, seconds: float) -> None:
        if lines:
            self.pushes.add(tenant, lines, size)
