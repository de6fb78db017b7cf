"""Metric query latency over the 1M-line benchmark set, through a real `logstore serve`.

    .venv/bin/python bench/ingest.py --lines 1000000 --keep DIR    # once, ~12 s
    .venv/bin/python bench/metrics.py --data DIR [--runs 5] [--no-report]
    .venv/bin/python bench/ingest.py --lines 1000000 --realistic --keep DIR
    .venv/bin/python bench/metrics.py --data DIR --realistic     # issue 25's queries
    .venv/bin/python bench/metrics.py --data DIR --workers 0     # on the server's threads

Every query runs as a `query_range` over the 24 h the set covers; the figure is the median
wall time of `--runs` requests after one warm-up. Writes the section
"Metric queries (bench/metrics.py)" of bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import sqlite3
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from ingest import (add_backend_flag, add_workers_flag, backend_config,  # noqa: E402
                    clickhouse_facts, free_port, start_server, workers_config)
from background import data_range, wait_for_background  # noqa: E402
from dataset import DAY_NS  # noqa: E402
from report import machine, table, update_section  # noqa: E402

SEL = '{env="bench"}'
# (name, query, step seconds or None for Loki's default)
QUERIES = [
    ("count by job, 24h, step 5m (rollups)",
     f"sum by (job) (count_over_time({SEL}[5m]))", 300),
    ("count by level, 24h, step 5m (rollups)",
     f"sum by (detected_level) (count_over_time({SEL}[5m]))", 300),
    ("count by job, 24h, default step 345s (rollups + partial minutes)",
     f"sum by (job) (count_over_time({SEL}[5m]))", None),
    ("bytes_rate, 24h, step 1m (rollups)", f"sum(bytes_rate({SEL}[1m]))", 60),
    ("topk(5, rate |= \"error\" [1m]) by stream, 24h, step 5m",
     f'topk(5, sum by (job, host) (rate({SEL} |= "error" [1m])))', 300),
    ("rare needle count, 24h, step 1h",
     f'sum(count_over_time({SEL} |= "needle-0c0ffee" [1h]))', 3600),
    ("quantile_over_time(0.99, logfmt unwrap latency [5m]) by host, 24h, step 5m",
     'quantile_over_time(0.99, {job="app"} | logfmt | unwrap latency [5m]) by (host)', 300),
    ("instant count over 24h", f"sum by (job) (count_over_time({SEL}[24h]))", "instant"),
]


# the realistic set (bench/dataset.py, `ingest.py --realistic`): the queries issue 25 measured
# Loki 3.7.6 on (external figures: 324 ms and 266 ms on the same 2-core machine class)
REALISTIC_QUERIES = [
    ("quantile_over_time(0.99, logfmt unwrap latency_ms [5m]) by host, 24h, step 5m",
     'quantile_over_time(0.99, {job="app"} | logfmt | unwrap latency_ms [5m]) by (host)', 300),
    ("JSON filter status >= 500, limit 1000 (log query)",
     '{job="api"} | json | status >= 500', "limit 1000"),
]


def run_query(port: int, query: str, start: int, end: int, step,
              prefix: str = "/logstore") -> tuple[float, dict]:
    """(seconds, answer) of one query; `prefix` /loki asks a Loki (bench/loki.py)."""
    if step == "limit 1000":
        path = prefix + "/api/v1/query_range?" + urllib.parse.urlencode(
            {"query": query, "start": str(start), "end": str(end), "limit": "1000"})
    elif step == "instant":
        path = prefix + "/api/v1/query?" + urllib.parse.urlencode(
            {"query": query, "time": str(end)})
    else:
        params = {"query": query, "start": str(start), "end": str(end)}
        if step is not None:
            params["step"] = str(step)
        path = prefix + "/api/v1/query_range?" + urllib.parse.urlencode(params)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    began = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    took = time.perf_counter() - began
    if resp.status != 200:
        raise SystemExit(f"{query}: {resp.status} {body[:300]!r}")
    return took, json.loads(body)


def realistic_medians(port: int, end_ns: int, prefix: str = "/logstore") -> dict[str, float]:
    """Each of REALISTIC_QUERIES over the day before `end_ns`: its median ms of 5 after a
    warm-up, and what it answered (series, or log lines) as "NAME: answered", to compare
    two stores (bench/calibrate.py, bench/loki.py)."""
    out = {}
    start = end_ns - DAY_NS
    for name, query, step in REALISTIC_QUERIES:
        run_query(port, query, start, end_ns, step, prefix)  # warm-up
        runs = [run_query(port, query, start, end_ns, step, prefix) for _ in range(5)]
        out[name] = 1000 * statistics.median(took for took, _ in runs)
        result = runs[-1][1]["data"]["result"]
        out[f"{name}: answered"] = (sum(len(s["values"]) for s in result)
                                    if result and "stream" in result[0] else len(result))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="directory given to ingest.py --keep")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--realistic", action="store_true",
                    help="the queries of the realistic set (ingest.py --realistic)")
    ap.add_argument("--no-report", action="store_true")
    add_workers_flag(ap)
    add_backend_flag(ap)
    args = ap.parse_args()
    queries = REALISTIC_QUERIES if args.realistic else QUERIES
    data_dir = Path(args.data) / "data"
    if args.backend == "clickhouse":
        start, end, _ = clickhouse_facts(data_dir)
    else:
        start, end = data_range(data_dir / "logstore.db")
    end -= 1  # the newest entry itself is the end
    port = free_port()
    proc = start_server(data_dir, port, workers_config(args.workers)
                        + backend_config(args.backend, data_dir))
    rows = []
    try:
        wait_for_background(data_dir / "logstore.db")
        for name, query, step in queries:
            run_query(port, query, start, end, step)          # warm-up
            times = []
            for _ in range(args.runs):
                took, body = run_query(port, query, start, end, step)
                times.append(took)
            summary = body["data"]["stats"]["summary"]
            series = len(body["data"]["result"])
            cell = lambda text: text.replace("|", "\\|")  # noqa: E731 (markdown table)
            rows.append([cell(name), f"`{cell(query)}`", step if step is not None else "default",
                         f"{statistics.median(times) * 1000:.0f} ms",
                         f"{min(times) * 1000:.0f} ms", series,
                         f"{summary['totalLinesProcessed']:,}"])
            print(f"{statistics.median(times) * 1000:8.1f} ms  {name}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    shape = ("the realistic set: 30 streams of loghub, 8-field logfmt and nested JSON"
             if args.realistic else "1,000,000 lines over 24 h")
    workers = ("" if args.workers is None
               else f", `querier.worker_processes: {args.workers}`")
    if args.backend == "clickhouse":
        workers += ", `storage.backend: clickhouse` (chdb)"
    body = (f"{machine()}; {shape} (bench/dataset.py), queried over HTTP "
            f"through `logstore serve`{workers}; median of {args.runs} runs after a "
            f"warm-up.\n\n"
            + table(["query", "LogQL", "step (s)", "median", "best", "series",
                     "lines counted"], rows))
    # no Loki runs here: a Loki figure written into every report would be a claim this
    # script never measured
    if not args.no_report:
        on = ", ClickHouse (chdb)" if args.backend == "clickhouse" else ""
        update_section(f"Metric queries, realistic set{on} (bench/metrics.py --realistic)"
                       if args.realistic else f"Metric queries{on} (bench/metrics.py)", body)


if __name__ == "__main__":
    main()
