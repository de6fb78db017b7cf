"""What each step of a realistic push costs alone, and what ingest at 1.5x Loki's speed
leaves a push on this machine.

    .venv/bin/python bench/ingest_floor.py [--pushes 300] [--loki-json N] [--loki-protobuf N]

The realistic set's 1,000-line pushes (bench/dataset.py: 30 streams, loghub, logfmt and
JSON lines, a day of timestamps over a million lines as bench/ingest.py sends them) go
through the server's own code one step at a time, in this process, each step timed in CPU
of the thread that runs it (`time.thread_time`), nothing else running:

- the body read into per-stream columns, JSON and snappy protobuf (services/ingest/decode.py);
- the preparation a query worker does (validation, levels, hashes, tallies, the pack), and
  of it the C pack with its zstd level 1 (services/ingest/columns.py `pack_stream`);
- the hop from the worker to the server: the prepared push pickled and unpickled;
- the writer's append and commit (storage/entries.py, synchronous=FULL, its checkpoints),
  one push a transaction and four;
- sealing the head those pushes left (storage/blocks/sealing.py: read, merge, encode at the
  sealed blocks' zstd parameters, store);
- HTTP: a bare ASGI app under granian that reads the body and answers 204, pushed by 4
  clients (its process group's CPU per push);
- the push log's path (what a push under load takes): the check and record of a push, then
  batches of 1, 8 and 32 pushes prepared and appended as one.

The sum of the steps taken while a push is pushed (sealing comes later, as Loki's chunk
flushing does) is what a push costs with no glue between them: no event loop hops, no
waits for the GIL or a CPU. With `--loki-json` / `--loki-protobuf` (Loki's lines/s
measured in the same sitting by bench/loki.py), it prints the CPU per 1,000 lines that 1.5x
that speed allows with both cores busy all the time. Nothing is written to bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dataset  # noqa: E402
from ingest import encode, free_port, group_cpu_seconds, push_all  # noqa: E402
from report import table  # noqa: E402

import app  # noqa: E402
import config as config_module  # noqa: E402
from services.ingest import prepare as prepare_module  # noqa: E402
from services.ingest.decode import JSON_MEDIA, decode_body  # noqa: E402
from services.ingest.prepare import Preparer  # noqa: E402
from services.ingest.records import checked_push, prepare_records  # noqa: E402
from services.runtime import memory  # noqa: E402
from services.runtime.limits import Limits  # noqa: E402
from storage.blocks import sealing  # noqa: E402
from storage.db import CHECKPOINT_PAGES, Database  # noqa: E402
from storage.entries import append  # noqa: E402
from storage.stream_ids import StreamIds  # noqa: E402

PROTOBUF_MEDIA = "application/x-protobuf"
# the bare HTTP server's app: reads the body to its end, answers 204
BARE_APP = '''
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})
'''


def timed(fn, items) -> tuple[float, list]:
    """(ms of this thread's CPU per item, the results)."""
    gc.collect()
    t0 = time.thread_time()
    out = [fn(x) for x in items]
    return (time.thread_time() - t0) * 1e3 / len(items), out


def prepare_steps(raw: list[dict], json_bodies: list[bytes]
                  ) -> tuple[list[tuple[str, float]], list]:
    proto_bodies, _ = encode(raw, "protobuf")
    limits = Limits(config_module.Config().limits_config).of("fake")
    preparer = Preparer(packs=True)
    read_json, streams = timed(lambda b: decode_body(JSON_MEDIA, b, 1 << 30, None), json_bodies)
    read_proto, _ = timed(lambda b: decode_body(PROTOBUF_MEDIA, b, 1 << 30, None),
                          proto_bodies)
    packing = [0.0]
    pack_stream = prepare_module.pack_stream

    def counted(*args):
        t0 = time.thread_time()
        try:
            return pack_stream(*args)
        finally:
            packing[0] += time.thread_time() - t0

    prepare_module.pack_stream = counted
    try:
        prepare, prepared = timed(lambda s: preparer.prepare(s, time.time_ns(), limits),
                                  streams)
    finally:
        prepare_module.pack_stream = pack_stream
    answers = [(True, value, None) for value in prepared]
    dump, pickles = timed(lambda a: pickle.dumps(a, protocol=pickle.HIGHEST_PROTOCOL), answers)
    load, _ = timed(pickle.loads, pickles)
    return [("the body read into columns, JSON", read_json),
            ("the body read into columns, snappy protobuf (instead of JSON)", read_proto),
            ("the worker's preparation", prepare),
            ("  of it, the C pack and its zstd level 1", packing[0] * 1e3 / len(raw)),
            ("the prepared push pickled and unpickled (the worker's hop)", dump + load)], \
        [p[0] for p in prepared]


def writer_run(prepared: list, per_commit: int, keep: str | None = None) -> float:
    """ms of the writer thread's CPU per push: append and commit, `per_commit` pushes a
    transaction, checkpointing as the writer does; `keep`: leave the database there."""
    groups = [prepared[i:i + per_commit] for i in range(0, len(prepared), per_commit)]
    return transactions_run(groups, keep) / len(prepared)


def transactions_run(groups: list[list], keep: str | None = None) -> float:
    """ms of the writer thread's CPU for all: each group's lists of streams appended in one
    transaction."""
    work = keep or tempfile.mkdtemp(prefix="logstore-floor-")
    db = Database(os.path.join(work, "data"))
    db.open()
    try:
        def run(conn) -> float:
            conn.execute("COMMIT")  # write_sync's own transaction: the pushes make theirs
            cache = StreamIds()
            t0 = time.thread_time()
            for group in groups:
                conn.execute("BEGIN IMMEDIATE")
                for streams in group:
                    append(conn, cache, "fake", streams)
                conn.execute("COMMIT")
                if db._wal_frames_waiting() >= CHECKPOINT_PAGES:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            took = time.thread_time() - t0
            conn.execute("BEGIN")
            return took
        return db.write_sync(run) * 1e3
    finally:
        db.close()
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def batch_steps(raw: list[dict], json_bodies: list[bytes], sizes: tuple[int, ...]
                ) -> list[tuple[str, float]]:
    """The push log's path (services/ingest/pending.py): each push checked and made a
    record, then `size` records at a time prepared as one batch (a stream's lines of every
    push in one pack per window) and appended in one transaction."""
    limits = Limits(config_module.Config().limits_config).of("fake")
    preparer = Preparer(packs=True)
    streams = [decode_body(JSON_MEDIA, b, 1 << 30, None) for b in json_bodies]
    now = time.time_ns()
    check, checked = timed(lambda s: checked_push(preparer, "fake", s, now, limits), streams)
    payloads = [c.payload for c in checked]
    out = [("the push log's check and record of a push", check)]
    for size in sizes:
        groups = [payloads[i:i + size] for i in range(0, len(payloads), size)]
        prepare, prepared = timed(lambda g: prepare_records(
            preparer, g, {"fake": limits}, now, sealing_window()), groups)
        out.append((f"  a batch of {size} pushes prepared (per push)", prepare / size))
        out.append((f"  a batch of {size} pushes appended and committed (per push)",
                    transactions_run([[s for _, s in p] for p in prepared]) / len(payloads)))
    return out


def sealing_window() -> int:
    return config_module.Config().storage.block_window


def sealing_run(work: str, lines: int) -> float:
    """ms of CPU per 1,000 lines to seal the whole head left in `work`: reads and encoding
    on this thread, the stores on the writer's (both counted)."""
    db = Database(os.path.join(work, "data"))
    db.open()
    writer_cpu = [0.0]

    def store(items):
        def run(conn):
            t0 = time.thread_time()
            try:
                return sealing.store_many(conn, items)
            finally:
                writer_cpu[0] += time.thread_time() - t0
        return db.write_sync(run)

    try:
        reading = db._reader()
        t0 = time.thread_time()
        while True:
            head = sealing.scan_head(reading, time.time_ns(), 3600 * 10**9, 0,
                                     sealing.DEFAULT_MAX_ROWS, True)
            if not head.groups:
                break
            for g in head.groups:
                prepared = sealing.read_group(reading, g.stream_id, g.lo, g.hi,
                                              sealing.DEFAULT_MAX_ROWS, None, g.packs > 0)
                if prepared is not None:
                    store([(g.stream_id, prepared)])
        took = time.thread_time() - t0 + writer_cpu[0]
    finally:
        db.close()
    return took * 1e6 / lines


def bare_http(bodies: list[bytes], clients: int) -> float:
    """Server CPU ms per push of a bare ASGI app under granian."""
    work = tempfile.mkdtemp(prefix="logstore-floor-http-")
    Path(work, "bare.py").write_text(BARE_APP)
    port = free_port()
    granian = Path(sys.executable).parent / "granian"
    proc = subprocess.Popen([str(granian), "--interface", "asgi", "--port", str(port),
                             "--workers", "1", "--log-level", "error", "bare:app"],
                            cwd=work, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("granian did not start")
                time.sleep(0.05)
        push_all(port, bodies[:20], JSON_MEDIA, clients)  # its worker started and warm
        before = group_cpu_seconds(proc.pid)
        push_all(port, bodies, JSON_MEDIA, clients)
        return (group_cpu_seconds(proc.pid) - before) * 1e3 / len(bodies)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pushes", type=int, default=300)
    ap.add_argument("--loki-json", type=float, help="Loki's JSON lines/s, same sitting")
    ap.add_argument("--loki-protobuf", type=float, help="Loki's protobuf lines/s")
    args = ap.parse_args()
    sys.setswitchinterval(app.GIL_SWITCH_INTERVAL)
    gc.set_threshold(memory.GC_GEN0_THRESHOLD, 10, 10)
    raw = list(dataset.batches(1_000_000, 1000, time.time_ns(), True))[:args.pushes]
    lines = sum(len(s["values"]) for b in raw for s in b["streams"])
    per_push = lines / len(raw) / 1000  # pushes are 1,000 lines: ms per push = per 1,000
    json_bodies, _ = encode(raw, "json")
    steps, prepared = prepare_steps(raw, json_bodies)
    kept = tempfile.mkdtemp(prefix="logstore-floor-seal-")
    try:
        steps.append(("the writer: append and commit, a push a transaction",
                      writer_run(prepared, 1, kept)))
        steps.append(("the writer: append and commit, 4 pushes a transaction",
                      writer_run(prepared, 4)))
        steps.append(("sealing what the pushes left (read, encode, store)",
                      sealing_run(kept, lines)))
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    steps.append(("HTTP: a bare ASGI app under granian, 4 clients (server CPU)",
                  bare_http(json_bodies, 4)))
    steps.extend(batch_steps(raw, json_bodies, (1, 8, 32)))
    rows = [[name, f"{ms / per_push:.2f}"] for name, ms in steps]
    print(table(["step (alone, one thread)", "ms of CPU per 1,000 lines"], rows))
    got = dict(steps)
    # what a push costs while it is pushed; sealing comes later (a window's late lines wait
    # for pushes to pause, as Loki flushes a chunk once idle), so it is left out as Loki's
    # chunk flushing is
    floor = sum(got[k] for k in (
        "the body read into columns, JSON", "the worker's preparation",
        "the writer: append and commit, 4 pushes a transaction",
        "HTTP: a bare ASGI app under granian, 4 clients (server CPU)")) / per_push
    proto = floor + (got["the body read into columns, snappy protobuf (instead of JSON)"]
                     - got["the body read into columns, JSON"]) / per_push
    print(f"\nthe steps of a push while it is pushed, summed (no hop, no sealing; the writer "
          f"at 4 pushes a commit): {floor:.2f} ms per 1,000 lines with a JSON body, "
          f"{proto:.2f} with protobuf")
    for name, loki, need in (("JSON", args.loki_json, floor),
                             ("protobuf", args.loki_protobuf, proto)):
        if loki:
            budget = 2 * 1e6 / (1.5 * loki)
            print(f"1.5x Loki's {loki:,.0f} {name} lines/s on two cores leaves "
                  f"{budget:.2f} ms of CPU per 1,000 lines with both cores busy all the "
                  f"time (the clients' share included): the steps alone take "
                  f"{need / budget:.0%} of it, {budget - need:.2f} ms are left for the rest")


if __name__ == "__main__":
    main()
