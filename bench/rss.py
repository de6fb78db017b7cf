"""Resident memory of the whole `logstore serve` process tree, idle and while the query and
metric benchmarks run against it (and, when the head holds due rows, while it seals).

    .venv/bin/python bench/rss.py --dir DIR        # DIR as given to bench/ingest.py --keep
    .venv/bin/python bench/rss.py --dir DIR --workers 0   # querier.worker_processes
    .venv/bin/python bench/rss.py --dir DIR --per-query   # each query's peak PSS per process

Samples the RSS of every process in the server's process group every 50 ms (ps), and prints
the peak during start-up and background work (sealing a head that `ingest.py` left behind),
idle, and the peak while the bench queries run. The sum of RSS counts a page shared by
several processes once in each: the serve process forks the server (and both map the same
libraries as the query workers). So each figure also has the tree's PSS (Linux's
/proc/PID/smaps_rollup: a shared page divided among the processes that map it), what the
tree takes from the machine.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import ingest  # noqa: E402
import metrics  # noqa: E402
import query  # noqa: E402
from background import data_range, wait_for_background  # noqa: E402


def tree_rss_kb(pgid: int) -> int:
    return sum(process_rss_kb(pgid).values())


def tree_pss_kb(pgid: int) -> int:
    return sum(process_pss_kb(process_rss_kb(pgid)).values())


def process_pss_kb(pids: Iterable[int]) -> dict[int, int]:
    out = {}
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue  # gone meanwhile
        out[pid] = next(int(line.split()[1]) for line in rollup.splitlines()
                        if line.startswith("Pss:"))
    return out


def process_rss_kb(pgid: int) -> dict[int, int]:
    out = subprocess.run(["ps", "-o", "pid=,rss=", "-g", str(pgid)], capture_output=True,
                         text=True).stdout.split()
    return {int(pid): int(rss) for pid, rss in zip(out[::2], out[1::2])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--per-query", action="store_true",
                    help="also print each query's peak PSS per process (sampled every 50 ms "
                         "and as it ends)")
    ingest.add_workers_flag(ap)
    args = ap.parse_args()
    data_dir = Path(args.dir) / "data"
    db = data_dir / "logstore.db"
    port = ingest.free_port()
    proc = ingest.start_server(data_dir, port, ingest.workers_config(args.workers))
    pgid = os.getpgid(proc.pid)
    peak = [0]
    peak_pss = [0]
    stop = threading.Event()

    query_peaks: dict[int, int] = {}  # pid -> peak PSS (kB) since the last query began
    query_peaks_lock = threading.Lock()

    def note_query_peaks(pss: dict[int, int]) -> None:
        with query_peaks_lock:
            for pid, kb in pss.items():
                query_peaks[pid] = max(query_peaks.get(pid, 0), kb)

    def sample() -> None:
        while not stop.is_set():
            rss = process_rss_kb(pgid)
            pss = process_pss_kb(rss)
            peak[0] = max(peak[0], sum(rss.values()))
            peak_pss[0] = max(peak_pss[0], sum(pss.values()))
            note_query_peaks(pss)
            stop.wait(0.05)

    def query_done(text: str) -> None:
        if args.per_query:  # a query shorter than a sample: its end is sampled too
            note_query_peaks(process_pss_kb(process_rss_kb(pgid)))
        with query_peaks_lock:
            peaks = ", ".join(f"{kb / 1024:.0f}" for _, kb in sorted(query_peaks.items()))
            query_peaks.clear()
        if args.per_query:
            print(f"{text[:60]:60s} peak PSS per process {peaks} MB")

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        sampler.start()
        waited = time.monotonic()
        wait_for_background(db)
        waited = time.monotonic() - waited
        background_peak, peak[0] = peak[0], 0
        background_pss, peak_pss[0] = peak_pss[0], 0
        idle, idle_pss = tree_rss_kb(pgid), tree_pss_kb(pgid)
        per_process = process_rss_kb(pgid)
        start, end = data_range(db)
        for spec in query.QUERIES:
            for limit in (spec.get("limit", 100),):
                params = {"query": spec["query"], "start": str(start), "end": str(end),
                          "limit": str(limit)}
                urllib.request.urlopen(f"http://127.0.0.1:{port}/logstore/api/v1/query_range?"
                                       + urllib.parse.urlencode(params), timeout=300).read()
                query_done(spec["query"])
        for _, q, step in metrics.QUERIES:
            metrics.run_query(port, q, start, end - 1, step)
            query_done(q)
        stop.set()
        sampler.join()
        peak_per_process = process_rss_kb(pgid)
        print(f"start-up and background work ({waited:.1f} s): peak "
              f"{background_peak / 1024:.0f} MB; idle: {idle / 1024:.0f} MB "
              f"({', '.join(f'{v / 1024:.0f}' for v in per_process.values())} per process); "
              f"peak while querying: {peak[0] / 1024:.0f} MB; after the queries "
              f"{', '.join(f'{v / 1024:.0f}' for v in peak_per_process.values())} MB per "
              f"process")
        print(f"PSS of the tree: start-up and background work peak "
              f"{background_pss / 1024:.0f} MB; idle {idle_pss / 1024:.0f} MB; peak while "
              f"querying {peak_pss[0] / 1024:.0f} MB")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


if __name__ == "__main__":
    main()
