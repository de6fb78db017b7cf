"""200 alerting and recording rules over the 1M-line benchmark set: evaluation time per round
and push throughput while the ruler runs.

    .venv/bin/python bench/ingest.py --lines 1000000 --keep DIR --no-report
    .venv/bin/python bench/ruler.py --dir DIR [--seconds 60] [--interval 15s]

Works on a copy of DIR's data. The rules query the set where it lies in time (`offset`),
so every evaluation reads real data: per job (18) a rate, an error count, a byte rate,
line-filtered counts and, for the logfmt job, a quantile over an unwrapped field, in ten
groups of twenty. Recording rules remote-write to an in-process receiver that accepts
everything; alerting rules notify an in-process Alertmanager stand-in.

1. idle: four clients push 1,000-line batches for `--seconds`, no rules;
2. ruler: the 200 rules are posted (interval `--interval`), the same pushes run for
   `--seconds`; the evaluation time of every group round comes from /metrics.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from background import data_range  # noqa: E402
from compact import copy, pushers, request, stop_server  # noqa: E402
from dataset import SYSTEMS  # noqa: E402
from ingest import free_port, start_server  # noqa: E402
from report import machine, table, update_section  # noqa: E402

JOBS = [s.lower() for s in SYSTEMS] + ["app", "web"]


def rule_groups(offset_s: int, interval: str) -> list[str]:
    off = f"offset {offset_s}s"
    rules = []
    for job in JOBS:
        sel = f'{{job="{job}"}}'
        rules += [
            ("record", f"job:{job}:lines:rate5m",
             f"sum by (host) (rate({sel}[5m] {off}))"),
            ("alert", f"{job.title()}Errors",
             f'sum by (host) (count_over_time({sel} |~ "(?i)error" [5m] {off})) > 1000'),
            ("record", f"job:{job}:bytes:rate5m",
             f"sum by (host) (bytes_rate({sel}[5m] {off}))"),
            ("alert", f"{job.title()}Quiet",
             f"sum(count_over_time({sel}[5m] {off})) < 1"),
            ("record", f"job:{job}:warn:count5m",
             f'sum(count_over_time({sel} |= "WARN" [5m] {off}))'),
            ("alert", f"{job.title()}Needle",
             f'sum(count_over_time({sel} |= "needle-0c0ffee" [1h] {off})) > 0'),
            ("record", f"job:{job}:failed:count5m",
             f'sum by (host) (count_over_time({sel} |= "failed" [5m] {off}))'),
            ("alert", f"{job.title()}Volume",
             f"sum(bytes_over_time({sel}[5m] {off})) > 1e9"),
            ("record", f"job:{job}:lines:count1m",
             f"sum(count_over_time({sel}[1m] {off}))"),
            ("alert", f"{job.title()}Burst",
             f"max by (host) (rate({sel}[1m] {off})) > 1000"),
            ("record", f"job:{job}:info:count5m",
             f'sum(count_over_time({sel} |= "INFO" [5m] {off}))'),
        ]
    rules = rules[:196] + [
        ("record", "job:app:latency:p99",
         f'quantile_over_time(0.99, {{job="app"}} | logfmt | unwrap latency [5m] {off}) by (host)'),
        ("alert", "AppSlow",
         f'quantile_over_time(0.99, {{job="app"}} | logfmt | unwrap latency [5m] {off}) '
         f'by (host) > 10'),
        ("record", "job:web:status5xx:rate5m",
         f'sum(rate({{job="web"}} | json | status >= 500 [5m] {off}))'),
        ("alert", "WebErrors",
         f'sum(rate({{job="web"}} | json | status >= 500 [5m] {off})) > 100'),
    ]
    groups = []
    for g in range(10):
        lines = [f"name: bench-{g}", f"interval: {interval}", "rules:"]
        for kind, name, expr in rules[g * 20:(g + 1) * 20]:
            lines += [f"  - {kind}: {name}", f"    expr: '{expr}'"]
            if kind == "alert":
                lines += ["    for: 1m", "    annotations:",
                          "      summary: '{{ $labels.host }}: {{ $value | humanize }}'"]
        groups.append("\n".join(lines) + "\n")
    return groups


class Sink:
    """Takes every POST (remote write, Alertmanager) and counts it."""

    def __init__(self):
        self.posts = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.posts += 1
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def rounds(port: int) -> dict[str, tuple[float, float]]:
    """rule_group -> (iterations, last duration) from /metrics."""
    _, body, _ = request(port, "GET", "/metrics")
    out: dict[str, list[float]] = {}
    for line in body.decode().splitlines():
        m = re.match(r'logstore_ruler_group_(iterations_total|last_duration_seconds)'
                     r'\{rule_group="([^"]+)",tenant="[^"]*"\} (\S+)', line)
        if m:
            out.setdefault(m.group(2), [0.0, 0.0])[0 if "iterations" in m.group(1) else 1] = \
                float(m.group(3))
    return {k: (v[0], v[1]) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", default="15s")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    source = Path(args.dir) / "data"
    _, end = data_range(source / "logstore.db")
    sink = Sink()
    config = ("limits_config:\n  reject_old_samples: false\n"
              f"ruler:\n  alertmanager_url: {sink.url}\n  remote_write:\n    enabled: true\n"
              f"    clients:\n      sink:\n        url: {sink.url}/api/v1/write\n")
    data = copy(source)
    port = free_port()
    proc = start_server(data, port, config)
    try:
        stop = threading.Event()
        counts = [0] * 4
        threads = pushers(port, stop, counts)
        time.sleep(args.seconds)  # a fixed measuring window, not synchronisation
        idle = sum(counts) / args.seconds

        # the set ends `end`; evaluations at "now" look back to its last hours
        offset = max(0, (time.time_ns() - end) // 10**9 + 600)
        for i, body in enumerate(rule_groups(offset, args.interval)):
            status, text, _ = request(port, "POST", "/logstore/api/v1/rules/bench",
                                      body.encode(), {"Content-Type": "application/yaml"})
            if status != 202:
                raise SystemExit(f"group {i} refused: {status} {text!r}")
        counts[:] = [0] * 4
        samples: dict[str, list[float]] = {}
        seen: dict[str, float] = {}
        began = time.monotonic()
        while time.monotonic() - began < args.seconds:
            time.sleep(0.5)  # sampling /metrics for each group's finished rounds
            for group, (n, last) in rounds(port).items():
                if n > seen.get(group, 0):
                    seen[group] = n
                    samples.setdefault(group, []).append(last)
        during = sum(counts) / (time.monotonic() - began)
        stop.set()
        for t in threads:
            t.join(60)
        _, body, _ = request(port, "GET", "/compat/api/v1/rules")
        health = [r["health"] for g in json.loads(body)["data"]["groups"] for r in g["rules"]]
    finally:
        stop_server(proc)
        shutil.rmtree(data.parent)
    per_round = [sum(v[i] for v in samples.values() if i < len(v))
                 for i in range(min((len(v) for v in samples.values()), default=0))]
    worst_group = max((max(v) for v in samples.values()), default=0.0)
    rows = [
        ["rules / groups", f"{len(health)} / {len(samples)} (interval {args.interval})"],
        ["rules healthy after the run", f"{health.count('ok')} of {len(health)}"],
        ["evaluation time per round, all 10 groups (mean / max)",
         f"{sum(per_round) / max(1, len(per_round)):.2f} s / {max(per_round, default=0):.2f} s"
         f" ({len(per_round)} rounds)"],
        ["share of a 1m interval", f"{max(per_round, default=0) / 60:.1%}"],
        ["slowest single group evaluation", f"{worst_group:.2f} s"],
        ["push throughput without rules (4 clients)", f"{idle:,.0f} lines/s"],
        ["push throughput while the ruler runs", f"{during:,.0f} lines/s "
                                                 f"({during / idle:.0%} of idle)"],
        ["requests to the remote-write / Alertmanager sink", f"{sink.posts:,}"],
    ]
    text = table(["measure", "value"], rows)
    print(text)
    if not args.no_report:
        update_section(
            "Ruler: 200 rules over the set (bench/ruler.py)",
            f"Command: `.venv/bin/python bench/ruler.py --dir DIR --seconds {args.seconds:g} "
            f"--interval {args.interval}` after `bench/ingest.py --lines 1000000 --keep DIR`"
            f"\n\nMachine: {machine()}; client and server share it.\n\n{text}")


if __name__ == "__main__":
    main()
