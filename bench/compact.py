"""Deleting a tenth of the benchmark set: compaction time, disk, and push throughput meanwhile.

    .venv/bin/python bench/ingest.py --lines 1000000 --keep DIR --no-report
    .venv/bin/python bench/compact.py --dir DIR [--needle info] [--seconds 8]

Works on copies of DIR's data (DIR is left as it is), with a server whose compactor sweeps
every second and whose cancel period is 0, so a delete request is removed from disk at the
next sweep. Two runs:

1. quiet: POST a delete request for `{env="bench"} |= "<needle>"` over the whole set; time
   from the 204 until GET /delete says `processed`; file size before and after (the server
   stopped, WAL checkpointed).
2. under load: four clients push batches of 1,000 new lines for `--seconds` before the
   request (idle figure) and then while the compactor removes it (during figure).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from background import data_range  # noqa: E402
from ingest import free_port, start_server  # noqa: E402
from report import machine, table, update_section  # noqa: E402

CONFIG = ("limits_config:\n  reject_old_samples: false\n"
          "compactor:\n  retention_enabled: true\n  compaction_interval: 1s\n"
          "  delete_request_cancel_period: 0s\n")


def request(port: int, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None) -> tuple[int, bytes, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    return resp.status, resp.read(), dict(resp.getheaders())


def disk(data_dir: Path) -> int:
    return sum(f.stat().st_size for f in data_dir.iterdir() if f.is_file())


def columns(data_dir: Path) -> tuple[int, int]:
    """(raw bytes of the lines, compressed bytes of the blocks' lines columns)."""
    conn = sqlite3.connect(f"file:{data_dir / 'logstore.db'}?mode=ro", uri=True)
    raw, packed = conn.execute(
        "SELECT (SELECT coalesce(sum(length(CAST(line AS BLOB))), 0) FROM entries) "
        "+ (SELECT coalesce(sum(bytes), 0) FROM blocks), "
        "(SELECT coalesce(sum(length(lines)), 0) FROM blocks)").fetchone()
    conn.close()
    return raw, packed


def metric(port: int, name: str) -> float:
    _, body, _ = request(port, "GET", "/metrics")
    return next(float(l.split()[-1]) for l in body.decode().splitlines()
                if l.startswith(name + " "))


def copy(src: Path) -> Path:
    dst = Path(tempfile.mkdtemp(prefix="compact-")) / "data"
    shutil.copytree(src, dst)
    return dst


def delete_and_wait(port: int, needle: str, start: int, end: int) -> float:
    params = urllib.parse.urlencode({"query": f'{{env="bench"}} |= "{needle}"',
                                     "start": str(start // 10**9),
                                     "end": str(end // 10**9 + 1)})
    began = time.monotonic()
    status, body, _ = request(port, "POST", "/logstore/api/v1/delete?" + params)
    if status != 204:
        raise SystemExit(f"delete request refused: {status} {body!r}")
    while True:
        _, body, _ = request(port, "GET", "/logstore/api/v1/delete")
        if json.loads(body)[0]["status"] == "processed":
            break
        time.sleep(0.1)  # polling the request's status
    # the sweep that processed it hands the freed pages back before it ends; the next one
    # to end certainly has
    sweeps = metric(port, "logstore_compactor_retention_sweeps_total")
    while metric(port, "logstore_compactor_retention_sweeps_total") < sweeps + 1:
        time.sleep(0.1)
    return time.monotonic() - began


def pushers(port: int, stop: threading.Event, counts: list[int], clients: int = 4) -> list:
    def run(k: int) -> None:
        i = 0
        while not stop.is_set():
            now = time.time_ns()
            values = [[str(now + j), f"pushed by client {k} batch {i} line {j} level=info"]
                      for j in range(1000)]
            body = json.dumps({"streams": [{"stream": {"job": "load", "k": str(k)},
                                            "values": values}]}).encode()
            status, _, _ = request(port, "POST", "/logstore/api/v1/push", body,
                                   {"Content-Type": "application/json"})
            if status == 204:
                counts[k] += 1000
            i += 1

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    return threads


def stop_server(proc) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--needle", default="info")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    source = Path(args.dir) / "data"
    start, end = data_range(source / "logstore.db")

    # 1. quiet
    data = copy(source)
    port = free_port()
    proc = start_server(data, port, CONFIG)
    stop_server(proc)  # migrations applied, WAL folded in: the "before" file
    before = disk(data)
    raw_before, packed_before = columns(data)
    proc = start_server(data, port, CONFIG)
    took = delete_and_wait(port, args.needle, start, end)
    deleted = metric(port, "logstore_compactor_deleted_lines_total")
    deleted_bytes = metric(port, "logstore_compactor_deleted_bytes_total")
    stop_server(proc)
    after = disk(data)
    _, packed_after = columns(data)
    conn = sqlite3.connect(f"file:{data / 'logstore.db'}?mode=ro", uri=True)
    total = conn.execute("SELECT (SELECT count(*) FROM entries) + "
                         "(SELECT coalesce(sum(rows), 0) FROM blocks)").fetchone()[0] + deleted
    conn.close()
    shutil.rmtree(data.parent)

    # 2. under load
    data = copy(source)
    proc = start_server(data, port, CONFIG)
    stop = threading.Event()
    counts = [0] * 4
    threads = pushers(port, stop, counts)
    time.sleep(args.seconds)  # a fixed measuring window, not synchronisation
    idle = sum(counts) / args.seconds
    counts[:] = [0] * 4
    began = time.monotonic()
    busy_took = delete_and_wait(port, args.needle, start, end)
    during = sum(counts) / (time.monotonic() - began)
    stop.set()
    for t in threads:
        t.join(60)
    stop_server(proc)
    shutil.rmtree(data.parent)
    rows = [
        ["lines in the set / deleted", f"{int(total):,} / {int(deleted):,} "
                                       f"({deleted / total:.1%})"],
        ["bytes of lines in the set / deleted", f"{raw_before / 1e6:.1f} MB / "
                                                f"{deleted_bytes / 1e6:.1f} MB "
                                                f"({deleted_bytes / raw_before:.1%})"],
        ["compressed lines columns before / after",
         f"{packed_before / 1e6:.1f} MB / {packed_after / 1e6:.1f} MB "
         f"(-{(packed_before - packed_after) / packed_before:.1%})"],
        ["compaction time, quiet (204 -> processed, space returned)", f"{took:.1f} s"],
        ["file before / after", f"{before / 1e6:.1f} MB / {after / 1e6:.1f} MB "
                                f"(-{(before - after) / before:.1%})"],
        ["push throughput before the request (4 clients)", f"{idle:,.0f} lines/s"],
        ["push throughput while the compactor removes it", f"{during:,.0f} lines/s "
                                                            f"({during / idle:.0%} of idle)"],
        ["compaction time under that load", f"{busy_took:.1f} s"],
    ]
    text = table(["measure", "value"], rows)
    print(text)
    if not args.no_report:
        update_section(
            f"Deleting lines with \"{args.needle}\" (bench/compact.py)",
            f"Command: `.venv/bin/python bench/compact.py --dir DIR --needle {args.needle}` "
            f"after `bench/ingest.py --lines 1000000 --keep DIR`\n\n"
            f"Machine: {machine()}; client and server share it.\n\n{text}")


if __name__ == "__main__":
    main()
