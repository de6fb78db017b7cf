"""Ingest throughput over HTTP: the benchmark data set pushed to a real `logstore serve`.

    .venv/bin/python bench/ingest.py [--lines 1000000] [--batch 1000] [--clients 4]
                                     [--format json|protobuf|otlp] [--keep DIR] [--realistic]
                                     [--flush] [--no-sealing] [--per-thread]

`otlp` sends OTLP/HTTP protobuf to /otlp/v1/logs, one resource per stream whose attributes
are the stream's labels; the server is told to index them all, so the same streams are
stored as with the other formats.

Bodies are encoded before the clock starts, so the figure is the server's. With --keep the
data directory is left in place for the query benchmarks. --per-thread prints the CPU of
each thread of the server's processes during the push, to see which stage a change moves.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import dataset  # noqa: E402
from report import machine, table, update_section  # noqa: E402


OTLP_INDEX_ALL = ("limits_config:\n  otlp_config:\n    resource_attributes:\n"
                  "      attributes_config:\n        - action: index_label\n"
                  "          regex: \".*\"\n")


def add_workers_flag(ap) -> None:
    """`--workers N`: the server's querier.worker_processes (see workers_config)."""
    ap.add_argument("--workers", type=int, default=None,
                    help="querier.worker_processes for the server (default: its default)")


def workers_config(workers: int | None) -> str:
    """The YAML a --workers flag adds to the server's config ("" for the default)."""
    return "" if workers is None else f"querier:\n  worker_processes: {workers}\n"


def add_backend_flag(ap) -> None:
    """`--backend sqlite|clickhouse`: where the server keeps log data (storage.backend)."""
    ap.add_argument("--backend", choices=["sqlite", "clickhouse"], default="sqlite",
                    help="storage.backend; clickhouse runs on the embedded engine (chdb) in "
                         "a directory beside the data directory")


def clickhouse_dir(data_dir: Path) -> Path:
    return data_dir.parent / "clickhouse"


def backend_config(backend: str, data_dir: Path) -> str:
    """The YAML a --backend flag adds to the server's config ("" for SQLite)."""
    if backend == "sqlite":
        return ""
    return (f"storage:\n  backend: clickhouse\n  clickhouse:\n"
            f"    url: chdb://{clickhouse_dir(data_dir).resolve()}\n")


def clickhouse_facts(data_dir: Path) -> tuple[int, int, int]:
    """(oldest, newest + 1, entries) of what a --backend clickhouse run stored, read on the
    embedded engine before a server opens it (chdb runs in one process at a time)."""
    from chdb import session
    s = session.Session(str(clickhouse_dir(data_dir)))
    try:
        text = s.query("SELECT min(ts), max(ts), count() FROM logstore.entries", "CSV")
        lo, hi, n = (int(x) for x in text.bytes().decode().strip().split(","))
    finally:
        s.close()
    return lo, hi + 1, n


def stored_bytes(data_dir: Path, backend: str) -> int:
    """Bytes on disk of what the server stored: the data directory's files, and with
    ClickHouse every file under its directory."""
    size = sum(f.stat().st_size for f in data_dir.iterdir() if f.is_file())
    if backend == "clickhouse":
        size += sum(f.stat().st_size for f in clickhouse_dir(data_dir).rglob("*")
                    if f.is_file())
    return size


def start_server(data_dir: Path, port: int, extra: str = "",
                 cwd: Path = ROOT) -> subprocess.Popen:
    """`logstore serve` of the checkout `cwd` (bench/ab.py runs two), once it is ready."""
    cfg = data_dir.parent / "bench-config.yaml"
    cfg.write_text(f"common:\n  path_prefix: {data_dir}\nserver:\n  log_level: warn\n{extra}")
    log = open(data_dir.parent / "server.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--config", str(cfg),
                             "--port", str(port)], cwd=cwd, start_new_session=True,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/ready")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("server did not become ready")


def _cpu_seconds(stat: Path) -> tuple[int, float]:
    """(process group, user + system CPU seconds) from a /proc .../stat file; the fields
    after the command's closing parenthesis: pgrp at 2, utime and stime at 11 and 12."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[2]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """CPU time (user + system) of the live processes of a process group: the server and
    its query workers (Linux's /proc)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            group, seconds = _cpu_seconds(stat)
        except OSError:
            continue  # ended meanwhile
        if group == pgid:
            total += seconds
    return total


def thread_cpu_seconds(pgid: int) -> dict[tuple[int, str, int], tuple[float, float]]:
    """(pid, process name, thread id) -> (CPU seconds (user + system), seconds it waited
    runnable for a CPU) of every thread of the live processes of a process group (Linux's
    /proc/PID/task; the wait is the second field of its schedstat, in ns)."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        proc_dir = stat.parent
        try:
            if _cpu_seconds(stat)[0] != pgid:
                continue
            name = (proc_dir / "comm").read_text().strip()
            for task in (proc_dir / "task").iterdir():
                waited = int((task / "schedstat").read_text().split()[1]) / 1e9
                out[(int(proc_dir.name), name, int(task.name))] = \
                    (_cpu_seconds(task / "stat")[1], waited)
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    return out


def python_thread_names(pids: set[int]) -> dict[int, str]:
    """Thread id -> Python's name for the thread, from `py-spy dump` (in the venv; needs
    ptrace, which root has): /proc names every thread of a Python process `python`."""
    spy = Path(sys.executable).parent / "py-spy"
    names: dict[int, str] = {}
    if not spy.exists():
        return names
    for pid in pids:
        try:
            text = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True,
                                  text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in text.splitlines():
            if line.startswith("Thread ") and '"' in line:
                tid = line.split()[1]
                if tid.isdigit():
                    names[int(tid)] = line.split('"')[1]
    return names


def per_thread_table(before: dict, after: dict, lines: int, clients: int, client_cpu: float,
                     elapsed: float) -> str:
    """The threads that used CPU during the push, most first, and the bench's own clients.
    A thread's wait for a CPU is the time it was runnable and not running: on two cores
    with the writer, the event loop and the workers all busy, a stage can wait as long as it
    runs, whatever the total CPU says."""
    used = {k: (cpu - before.get(k, (0.0, 0.0))[0], waited - before.get(k, (0.0, 0.0))[1])
            for k, (cpu, waited) in after.items()}
    names = python_thread_names({pid for pid, _, _ in used})
    rows = [[f"{name} {pid}", names.get(tid, f"{tid}, not a Python thread"), f"{sec:.2f} s",
             f"{sec * 1e6 / lines:.2f}", f"{waited / elapsed:.0%}"]
            for (pid, name, tid), (sec, waited) in sorted(used.items(), key=lambda kv: -kv[1][0])
            if sec >= 0.05]
    rows.append([f"this bench ({clients} clients)", "",
                 f"{client_cpu:.2f} s ({client_cpu / elapsed:.2f} cores)",
                 f"{client_cpu * 1e6 / lines:.2f}", ""])
    return table(["process", "thread", "CPU", "ms per 1,000 lines",
                  "of the wall time waiting for a CPU"], rows)


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def encode(bodies: list[dict], fmt: str) -> tuple[list[bytes], str]:
    if fmt == "json":
        return [json.dumps(b).encode() for b in bodies], "application/json"
    if fmt == "otlp":
        return [encode_otlp(b) for b in bodies], "application/x-protobuf"
    import snappy
    from proto import push_pb2
    out = []
    for body in bodies:
        req = push_pb2.PushRequest()
        for s in body["streams"]:
            ps = req.streams.add()
            ps.labels = "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(s["stream"].items())) + "}"
            for ts, line in s["values"]:
                e = ps.entries.add()
                e.timestamp.seconds, e.timestamp.nanos = divmod(int(ts), 10**9)
                e.line = line
        out.append(snappy.compress(req.SerializeToString()))
    return out, "application/x-protobuf"


def encode_otlp(body: dict) -> bytes:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest)
    req = ExportLogsServiceRequest()
    for s in body["streams"]:
        rl = req.resource_logs.add()
        for key, value in sorted(s["stream"].items()):
            attr = rl.resource.attributes.add()
            attr.key, attr.value.string_value = key, value
        records = rl.scope_logs.add().log_records
        for ts, line in s["values"]:
            rec = records.add()
            rec.time_unix_nano = int(ts)
            rec.body.string_value = line
    return req.SerializeToString()


def push_all(port: int, bodies: list[bytes], ctype: str, clients: int,
             path: str = "/logstore/api/v1/push") -> float:
    work: queue.SimpleQueue = queue.SimpleQueue()
    for body in bodies:
        work.put(body)
    errors: list[str] = []

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            try:
                body = work.get_nowait()
            except queue.Empty:
                return
            conn.request("POST", path, body=body,
                         headers={"Content-Type": ctype})
            resp = conn.getresponse()
            text = resp.read()
            if resp.status != 204:
                errors.append(f"{resp.status} {text[:200]!r}")
                return

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"push failed: {errors[0]}")
    return elapsed


def flush(port: int, data_dir: Path, backend: str = "sqlite") -> tuple[float, int]:
    """(seconds POST /flush took, bytes of every file in the data directory after it), the
    server still running: its -wal file counts, as a user's `du` would count it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    t0 = time.perf_counter()
    conn.request("POST", "/flush")
    status = conn.getresponse().status
    seconds = time.perf_counter() - t0
    if status != 204:
        raise SystemExit(f"/flush answered {status}")
    if backend == "clickhouse":
        # the directory still holds the parts the merge replaced (ClickHouse removes them
        # minutes later): the server's own figure of its active parts is what stays
        files = sum(f.stat().st_size for f in data_dir.iterdir() if f.is_file())
        return seconds, files + clickhouse_active_bytes(port)
    return seconds, stored_bytes(data_dir, backend)


def clickhouse_active_bytes(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics")
    for line in conn.getresponse().read().decode().splitlines():
        if line.startswith("logstore_clickhouse_size_bytes "):
            return int(float(line.split()[1]))
    raise SystemExit("/metrics has no logstore_clickhouse_size_bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--format", choices=["json", "protobuf", "otlp"], default="json")
    ap.add_argument("--keep", help="data directory to keep for the query benchmarks")
    ap.add_argument("--realistic", action="store_true",
                    help="the realistic set (bench/dataset.py): loghub, 8-field logfmt, "
                         "nested JSON in 30 streams")
    ap.add_argument("--flush", action="store_true",
                    help="after the pushes, POST /flush and measure the data directory while "
                         "the server still runs (SQLite's -wal file included, issue 25)")
    ap.add_argument("--no-sealing", action="store_true",
                    help="storage.sealing_enabled: false (what the push path alone costs)")
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument("--per-thread", action="store_true",
                    help="print the CPU each thread of the server's processes used (named "
                         "by py-spy) and the clients' own CPU")
    add_backend_flag(ap)
    add_workers_flag(ap)
    args = ap.parse_args()

    end_ns = time.time_ns()
    raw = list(dataset.batches(args.lines, args.batch, end_ns, args.realistic))
    line_bytes = sum(len(v[1].encode()) for b in raw for s in b["streams"] for v in s["values"])
    bodies, ctype = encode(raw, args.format)
    body_bytes = sum(len(b) for b in bodies)
    n_streams = len({json.dumps(s["stream"], sort_keys=True) for s in raw[0]["streams"]})
    del raw

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="logstore-bench-"))
    data_dir = work / "data"
    for old in (data_dir, clickhouse_dir(data_dir)):
        if old.exists():
            shutil.rmtree(old)
    data_dir.mkdir(parents=True)
    port = free_port()
    otlp = args.format == "otlp"
    proc = start_server(data_dir, port, (OTLP_INDEX_ALL if otlp else "")
                        + backend_config(args.backend, data_dir)
                        + workers_config(args.workers)
                        + ("storage:\n  sealing_enabled: false\n" if args.no_sealing else ""))
    try:
        cpu_before = group_cpu_seconds(proc.pid)
        threads_before = thread_cpu_seconds(proc.pid) if args.per_thread else {}
        own_before = os.times()
        elapsed = push_all(port, bodies, ctype, args.clients,
                           "/otlp/v1/logs" if otlp else "/logstore/api/v1/push")
        own = os.times()
        cpu = group_cpu_seconds(proc.pid) - cpu_before
        if args.per_thread:
            print(per_thread_table(threads_before, thread_cpu_seconds(proc.pid), args.lines,
                                   args.clients,
                                   own.user - own_before.user + own.system - own_before.system,
                                   elapsed))
        flushed = flush(port, data_dir, args.backend) if args.flush else None
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    disk = stored_bytes(data_dir, args.backend)
    rows = [
        ["lines", f"{args.lines:,}"], ["streams", n_streams],
        ["batch (lines/request)", args.batch], ["concurrent clients", args.clients],
        ["format", args.format], ["backend", args.backend],
        ["wall time", f"{elapsed:.2f} s"],
        ["lines/s", f"{args.lines / elapsed:,.0f}"],
        ["MB/s (line bytes)", f"{line_bytes / elapsed / 1e6:.1f}"],
        ["MB/s (request bodies)", f"{body_bytes / elapsed / 1e6:.1f}"],
        ["server CPU, query workers included (user + system)",
         f"{cpu:.1f} s ({cpu / elapsed:.2f} cores, {cpu * 1e6 / args.lines:.1f} ms per "
         "1,000 lines)"],
        ["bytes on disk / line byte", f"{disk / line_bytes:.2f}"],
    ]
    if flushed is not None:
        seconds, size = flushed
        rows += [["/flush", f"{seconds:.1f} s"],
                 ["bytes on disk / line byte after /flush, -wal included"
                  + (" (ClickHouse: active parts)" if args.backend == "clickhouse" else ""),
                  f"{size / line_bytes:.3f} ({size / 1e6:.2f} MB)"]]
    text = table(["measure", "value"], rows)
    print(text)
    if not args.no_report:
        update_section(
            f"Ingest, {args.format}{', realistic set' if args.realistic else ''}"
            f"{', ClickHouse (chdb)' if args.backend == 'clickhouse' else ''} (bench/ingest.py)",
            f"Command: `.venv/bin/python bench/ingest.py --lines {args.lines} --batch "
            f"{args.batch} --clients {args.clients} --format {args.format}"
            f"{' --realistic' if args.realistic else ''}{' --flush' if args.flush else ''}"
            f"{' --backend clickhouse' if args.backend == 'clickhouse' else ''}`\n\n"
            f"Machine: {machine()}; client and server share it.\n\n{text}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
