"""The writer's append and commit of realistic 1,000-line pushes, alone and with Python
threads running beside it, as the server's event loop and reader threads do.

    .venv/bin/python bench/writer_gil.py [--pushes 300] [--beside 0 1] [--runs 2]

Each push of the realistic set (bench/dataset.py: 30 streams, loghub, logfmt and JSON lines)
is decoded and prepared first, as a query worker would; then one writer thread appends and
commits them one transaction each, with the server's GIL switch interval and pragmas
(WAL, synchronous=FULL), checkpointing as the writer does. `--beside N` runs N threads that
only run Python meanwhile. Prints milliseconds per push for the append and the commit, and
the SQLite statements the append started per push (an `executemany` starts one per row: each
gives up the GIL and waits to get it back). Nothing is written to bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dataset  # noqa: E402

import app  # noqa: E402
import config as config_module  # noqa: E402
from services.ingest.decode import JSON_MEDIA, decode_body  # noqa: E402
from services.ingest.prepare import Preparer  # noqa: E402
from services.runtime import memory  # noqa: E402
from services.runtime.limits import Limits  # noqa: E402
from storage.db import CHECKPOINT_PAGES, Database  # noqa: E402
from storage.entries import append  # noqa: E402
from storage.stream_ids import StreamIds  # noqa: E402


def prepared_pushes(pushes: int) -> list:
    # the density of bench/ingest.py's million lines over a day, so that as few pushes span
    # an hour's boundary as there
    end = time.time_ns()
    raw = list(dataset.batches(1_000_000, 1000, end, True))[:pushes]
    limits = Limits(config_module.Config().limits_config).of("fake")
    preparer = Preparer(packs=True)
    return [preparer.prepare(decode_body(JSON_MEDIA, json.dumps(body).encode(), 1 << 30,
                                         None), time.time_ns(), limits)[0] for body in raw]


def run(prepared: list, beside: int) -> tuple[float, float, float]:
    stop = threading.Event()

    def spin() -> None:
        scratch: dict[int, str] = {}
        while not stop.is_set():
            for i in range(1000):
                scratch[i] = str(i)

    spinners = [threading.Thread(target=spin, daemon=True) for _ in range(beside)]
    for t in spinners:
        t.start()
    work = tempfile.mkdtemp(prefix="logstore-writer-gil-")
    db = Database(os.path.join(work, "data"))
    db.open()
    conn = db._writer_conn
    took = {"append": 0.0, "commit": 0.0, "timed": 0, "statements": 0, "counted": 0}

    def writer() -> None:
        cache = StreamIds()
        started: list[str] = []
        for i, streams in enumerate(prepared):
            # every 20th push counts its statements and is not timed: the trace callback
            # gets each statement's text with its values expanded (blobs as hex), which
            # cost more than the append itself
            counting = i % 20 == 10
            conn.execute("BEGIN IMMEDIATE")
            if counting:
                conn.set_trace_callback(started.append)
            t0 = time.perf_counter()
            append(conn, cache, "fake", streams)
            t1 = time.perf_counter()
            conn.set_trace_callback(None)
            conn.execute("COMMIT")
            if counting:
                took["counted"] += 1
            else:
                took["append"] += t1 - t0
                took["commit"] += time.perf_counter() - t1
                took["timed"] += 1
            if db._wal_frames_waiting() >= CHECKPOINT_PAGES:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        took["statements"] = len(started)

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    stop.set()
    for t in spinners:
        t.join()
    db.close()
    shutil.rmtree(work, ignore_errors=True)
    n = took["timed"]
    return took["append"] * 1000 / n, took["commit"] * 1000 / n, \
        took["statements"] / took["counted"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pushes", type=int, default=300)
    ap.add_argument("--beside", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    sys.setswitchinterval(app.GIL_SWITCH_INTERVAL)
    gc.set_threshold(memory.GC_GEN0_THRESHOLD, 10, 10)
    prepared = prepared_pushes(args.pushes)
    for _ in range(args.runs):
        for beside in args.beside:
            a, c, s = run(prepared, beside)
            print(f"{beside} Python thread(s) beside: append {a:.2f} ms, commit {c:.2f} ms "
                  f"a push; {s:.1f} statements a push")


if __name__ == "__main__":
    main()
