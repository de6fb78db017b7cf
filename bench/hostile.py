"""Memory of the soak's hostile requests, one at a time and ten of a kind at once, against a
copy of a soak's data (issue 15).

    .venv/bin/python bench/soak.py --seconds 600        # keeps its data in /tmp/soak-*
    .venv/bin/python bench/hostile.py --soak SOAK_DIR [--memray]

Starts `logstore serve` on a copy of the soak's database, with the soak's config, and for each
hostile request of bench/soak.py reports its status and the process tree's RSS before it, at
its peak (sampled every 30 ms) and after; then ten of each kind at once; then all ten kinds
at once. The requests' time range ends at the newest stored line. With --memray the server
runs under memray (`pip install memray`) and the allocations at its peak of the last round
are printed, biggest first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import ingest  # noqa: E402
import soak  # noqa: E402
from background import data_range  # noqa: E402
from rss import process_rss_kb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soak", required=True, help="a directory bench/soak.py left behind")
    ap.add_argument("--memray", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    (work / "data").mkdir()
    db = work / "data" / "logstore.db"
    shutil.copy(Path(args.soak) / "data" / "logstore.db", db)
    _, newest = data_range(db)
    soak.time.time_ns = lambda: newest  # the requests' ranges end at the newest line
    if args.memray:
        wrapper = work / "python"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m memray run -q -f --native "
                           f"--follow-fork -o {work}/memray.bin \"$@\"\n")
        wrapper.chmod(0o755)
        ingest.sys.executable = str(wrapper)
    port = ingest.free_port()
    proc = ingest.start_server(work / "data", port, soak.CONFIG)
    pgid = os.getpgid(proc.pid)
    url = f"http://127.0.0.1:{port}"

    def rss() -> float:
        return sum(process_rss_kb(pgid).values()) / 1024

    def run(indices: list[int]) -> tuple[str, str, float, float, float]:
        peak, stop = [0.0], threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], rss())
                stop.wait(0.03)

        before = rss()
        sampler = threading.Thread(target=sample)
        sampler.start()
        results = soak.hostile_requests(url, indices)
        stop.set()
        sampler.join()
        statuses = ", ".join(str(s) for s in sorted({s for _, s in results}))
        name = results[0][0] if len(set(indices)) == 1 else "all ten kinds"
        return name, statuses, before, peak[0], rss()

    rows = []
    try:
        for k in range(10):
            rows.append(("alone", *run([k])))
        for k in range(10):
            rows.append(("ten at once", *run([k] * 10)))
        rows.append(("one of each at once", *run(list(range(10)))))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    print("| request | how | status | RSS before | peak | added | after |\n"
          "|---|---|---|---|---|---|---|")
    for how, name, status, before, peak, after in rows:
        print(f"| {name} | {how} | {status} | {before:.0f} MB | {peak:.0f} MB | "
              f"{peak - before:+.0f} MB | {after:.0f} MB |")
    if args.memray:
        from memray import FileReader
        files = sorted(work.glob("memray.bin.*"), key=lambda p: p.stat().st_size)
        reader = FileReader(files[-1])
        print(f"\nmemray: peak {reader.metadata.peak_memory / 2**20:.0f} MB")
        records = sorted(reader.get_high_watermark_allocation_records(merge_threads=True),
                         key=lambda a: -a.size)
        for a in records[:8]:
            where = " < ".join(f"{f[0]} {Path(f[1]).name}:{f[2]}" for f in a.stack_trace()[:4])
            print(f"{a.size / 2**20:8.1f} MB in {a.n_allocations} allocations: {where}")


if __name__ == "__main__":
    main()
