"""Latency of index stats, volume, volume_range, patterns, detected fields and labels on the
1M-line set, and ingest throughput with the pattern miner on and off.

    .venv/bin/python bench/meta.py [--lines 1000000] [--runs 7]

Pushes the benchmark set (24 h ending now, 36 streams) to a fresh server twice: once as
bench/ingest.py does, once with `pattern_ingester.enabled` (the ingest figure of each); then,
on the second, waits for the miner to have read every line and times each endpoint over the
whole 24 h (median of `--runs` requests, client on the same machine).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import dataset  # noqa: E402
from ingest import encode, free_port, push_all, start_server  # noqa: E402
from report import machine, table, update_section  # noqa: E402

PATTERNS_ON = "pattern_ingester:\n  enabled: true\n  retain_for: 30h\n"


def get(port: int, path: str, params: dict) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", path + "?" + urllib.parse.urlencode(params))
    resp = conn.getresponse()
    return resp.status, resp.read()


def timed(port: int, path: str, params: dict, runs: int) -> tuple[float, bytes]:
    took, body = [], b""
    for _ in range(runs):
        began = time.perf_counter()
        status, body = get(port, path, params)
        took.append(time.perf_counter() - began)
        if status != 200:
            raise SystemExit(f"{path} answered {status}: {body[:200]!r}")
    return statistics.median(took), body


def mined(port: int) -> float:
    _, body = get(port, "/metrics", {})
    for line in body.decode().splitlines():
        if line.startswith("logstore_patterns_lines_mined_total "):
            return float(line.split()[-1])
    return 0.0


def ingest(bodies: list[bytes], lines: int, extra: str):
    work = Path(tempfile.mkdtemp(prefix="logstore-meta-"))
    data = work / "data"
    data.mkdir()
    port = free_port()
    proc = start_server(data, port, "limits_config:\n  reject_old_samples: false\n" + extra)
    try:
        elapsed = push_all(port, bodies, "application/json", 4)
    except BaseException:
        os.killpg(proc.pid, signal.SIGTERM)
        raise
    return lines / elapsed, port, work, proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    end = time.time_ns()
    bodies, _ = encode(list(dataset.batches(args.lines, 1000, end)), "json")

    plain, _, work, proc = ingest(bodies, args.lines, "")
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(60)
    shutil.rmtree(work, ignore_errors=True)

    with_patterns, port, work, proc = ingest(bodies, args.lines, PATTERNS_ON)
    try:
        began = time.monotonic()
        while mined(port) < args.lines:
            if time.monotonic() - began > 600:
                raise SystemExit(f"the miner read {mined(port):,.0f} lines in 10 minutes")
            time.sleep(0.5)  # polling the miner's progress
        catch_up = time.monotonic() - began
        day = {"start": str(end - 24 * 3600 * 10**9), "end": str(end)}
        sel = {"query": '{env="bench"}', **day}
        rows = []
        cases = [
            ("index/stats", "/logstore/api/v1/index/stats", sel),
            ("index/volume (by job)", "/logstore/api/v1/index/volume",
             {**sel, "targetLabels": "job"}),
            ("index/volume (aggregateBy=labels)", "/logstore/api/v1/index/volume",
             {**sel, "aggregateBy": "labels"}),
            ("index/volume_range (step 1h, by job)", "/logstore/api/v1/index/volume_range",
             {**sel, "targetLabels": "job", "step": "3600"}),
            ("patterns, one job (step 1h)", "/logstore/api/v1/patterns",
             {"query": '{job="openssh"}', **day, "step": "3600"}),
            ("patterns, all 36 streams (step 1h)", "/logstore/api/v1/patterns",
             {**sel, "step": "3600"}),
            ("detected_fields (JSON job, 100 lines)", "/logstore/api/v1/detected_fields",
             {"query": '{job="web"}', **day}),
            ("detected_fields (all, 1000 lines)", "/logstore/api/v1/detected_fields",
             {**sel, "line_limit": "1000"}),
            ("detected_labels", "/logstore/api/v1/detected_labels", sel),
        ]
        for name, path, params in cases:
            took, body = timed(port, path, params, args.runs)
            parsed = json.loads(body)
            inner = parsed.get("data", parsed)
            if isinstance(inner, dict):
                inner = inner.get("result", inner.get("fields", inner.get("detectedLabels",
                                                                          inner)))
            size = len(inner) if isinstance(inner, (list, dict)) else 1
            rows.append([name, f"{took * 1000:.1f} ms", f"{size}"])
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        shutil.rmtree(work, ignore_errors=True)
    text = table(["request over 24 h of the 1M-line set", "median", "items"], rows)
    ingest_text = table(["ingest (4 clients, 1,000-line JSON batches)", "lines/s"], [
        ["pattern miner off", f"{plain:,.0f}"],
        ["pattern miner on", f"{with_patterns:,.0f} ({with_patterns / plain:.0%} of off)"],
        ["miner caught up after the last push", f"{catch_up:.1f} s"]])
    print(text)
    print(ingest_text)
    if not args.no_report:
        update_section(
            "Stats, volume, patterns, detected fields (bench/meta.py)",
            f"Command: `.venv/bin/python bench/meta.py --lines {args.lines} --runs "
            f"{args.runs}`\n\nMachine: {machine()}; client and server share it.\n\n"
            f"{text}\n\n{ingest_text}")


if __name__ == "__main__":
    main()
