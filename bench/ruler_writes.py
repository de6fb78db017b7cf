"""The ruler's writes with many series (issue 22).

alerts: N pods, each firing `PodErrors` (`sum by (pod) (count_over_time(...)) > 0`), then four
evaluations a minute apart: the first finds every alert new, the second sees 1 % of the pods
change value, the third re-sends every alert (Prometheus' resend_delay, 1m: every
`last_sent_at` changes), the fourth finds nothing changed. For each: the rows of
alert_states written, the time of that write job and of the whole evaluation. Then a
cluster follower's look at the shared state (`Ruler.sync`), first and with nothing changed.

buffer: the remote-write buffer of a client whose receiver is away, filled to
max_buffered_samples (default 1,000,000), then 20 recording-rule evaluations of 100 samples
buffered (each drops the 100 oldest) and the buffered-samples gauge read as /metrics does.

    .venv/bin/python bench/ruler_writes.py alerts [--pods 20000]
    .venv/bin/python bench/ruler_writes.py buffer [--samples 1000000]

In-process (the app under Litestar's test client, as the tests run it; the buffer on the
SQLite file directly); prints a table and writes nothing to bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NS = 10**9
MINUTE = 60 * NS
GROUP = """\
name: pods
interval: 1m
rules:
  - alert: PodErrors
    expr: sum by (pod) (count_over_time({job="k"} |= "error" [5m])) > 0
    annotations:
      summary: '{{ $labels.pod }} logged {{ $value }} errors'
"""


class TimedWrites:
    """The ruler's database, its write jobs timed and their rows counted."""

    def __init__(self, db: Any):
        self.db = db
        self.rows = 0
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)

    async def write(self, fn: Any) -> Any:
        def counted(conn: Any) -> Any:
            before = conn.total_changes
            out = fn(conn)
            self.rows += conn.total_changes - before
            return out
        began = time.perf_counter()
        try:
            return await self.db.write(counted)
        finally:
            self.seconds += time.perf_counter() - began


def push(c: Any, at: int, pods: list[str]) -> None:
    for first in range(0, len(pods), 500):
        streams = [{"stream": {"job": "k", "pod": pod}, "values": [[str(at), "error"]]}
                   for pod in pods[first:first + 500]]
        r = c.post("/logstore/api/v1/push", content=json.dumps({"streams": streams}),
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 204, r.text


def alerts(pods: int) -> None:
    from litestar.testing import TestClient

    import config as config_module
    from app import create_app

    work = Path(tempfile.mkdtemp(prefix="logstore-ruler-writes-"))
    cfg = {"common": {"path_prefix": str(work / "data")}, "server": {"log_level": "warn"},
           "limits_config": {"reject_old_samples": False, "max_query_series": 10**6}}
    now = time.time_ns()
    t0 = now - now % MINUTE - 30 * MINUTE
    names = [f"pod-{i}" for i in range(pods)]
    out = []
    with TestClient(create_app(config_module.config_from_dict(cfg))) as c:
        ruler = c.app.state.services.ruler
        c.blocking_portal.call(ruler.pause)
        assert c.post("/logstore/api/v1/rules/k8s", content=GROUP).status_code == 202
        run = ruler.runs[("fake", "k8s", "pods")]
        timed = ruler.db = TimedWrites(ruler.db)
        push(c, t0 + 10 * NS, names)
        steps = (("all new", 1, []), ("1 % changed", 2, names[::100]),
                 ("all re-sent", 3, []), ("none changed", 4, []))
        for label, minute, changed in steps:
            push(c, t0 + (minute * 60 - 50) * NS, changed)
            timed.rows, timed.seconds = 0, 0.0
            began = time.perf_counter()
            c.blocking_portal.call(ruler.evaluate, run, t0 + minute * MINUTE)
            took = time.perf_counter() - began
            firing = sum(a.state == "firing" for a in run.rules[0].alerts.values())
            assert firing == pods, (label, firing, run.rules[0].last_error)
            out.append((label, timed.rows, timed.seconds, took))
        # a cluster's follower (docs/scale-out.md): its look at the shared state every 5 s,
        # the first one and then five with nothing changed
        looks = []
        for _ in range(6):
            ruler.leading = False  # as a node that does not hold the ruler's lease
            began = time.perf_counter()
            c.blocking_portal.call(ruler.sync)
            looks.append(time.perf_counter() - began)
    print(f"{pods:,} pods firing")
    print("| evaluation | alert_states rows written | write job | evaluation |")
    print("|---|---:|---:|---:|")
    for label, rows, write, took in out:
        print(f"| {label} | {rows:,} | {write * 1000:,.1f} ms | {took * 1000:,.0f} ms |")
    print(f"\na follower's look: first {looks[0] * 1000:,.1f} ms, then (nothing changed) "
          + " / ".join(f"{x * 1000:,.1f}" for x in looks[1:]) + " ms")


def buffer(samples: int) -> None:
    from storage import rules as store
    from storage.db import Database

    work = Path(tempfile.mkdtemp(prefix="logstore-rw-buffer-"))
    db = Database(str(work))
    db.open()
    try:
        batch = [({"__name__": "job:lines:rate5m", "pod": f"pod-{i}"}, 1_800_000_000_000, 1.0)
                 for i in range(10_000)]
        for _ in range(samples // len(batch)):
            db.write_sync(lambda conn: store.buffer_samples(conn, ["gone"], "fake", batch,
                                                            samples))
        rule = batch[:100]
        enqueue, dropped = [], 0
        for _ in range(20):
            began = time.perf_counter()
            dropped += db.write_sync(lambda conn: store.buffer_samples(
                conn, ["gone"], "fake", rule, samples))
            enqueue.append(time.perf_counter() - began)
        scrape = []
        for _ in range(5):
            began = time.perf_counter()
            counts = db.read_sync(store.buffered)
            scrape.append(time.perf_counter() - began)
        assert counts == {"gone": samples} and dropped == 20 * len(rule), (counts, dropped)
    finally:
        db.close()
    print(f"{samples:,} samples buffered")
    print("| | median | max |")
    print("|---|---:|---:|")
    print(f"| enqueue of 100 samples (100 dropped) | {statistics.median(enqueue) * 1000:.2f} ms "
          f"| {max(enqueue) * 1000:.2f} ms |")
    print(f"| buffered-samples gauge (/metrics) | {statistics.median(scrape) * 1000:.2f} ms "
          f"| {max(scrape) * 1000:.2f} ms |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("alerts").add_argument("--pods", type=int, default=20000)
    sub.add_parser("buffer").add_argument("--samples", type=int, default=1_000_000)
    args = ap.parse_args()
    if args.what == "alerts":
        alerts(args.pods)
    else:
        buffer(args.samples)


if __name__ == "__main__":
    main()
