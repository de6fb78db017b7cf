"""Grafana Loki measured on this machine beside this checkout: issue 25's figures.

    .venv/bin/python bench/loki.py --loki PATH [--lines 1000000] [--runs 3]
                                   [--format json protobuf] [--no-report]

Each run pushes the realistic set (bench/dataset.py, 1,000-line batches, 4 clients) to a Loki
single binary on a fresh directory, then to `logstore serve` of this checkout, alternated, so
both meet the same sitting. After the JSON push each gets `POST /flush`, its bytes on disk are
taken (Loki's `wal/` left out, as issue 25 did; SQLite's -wal file counted) and issue 25's
two queries run (bench/metrics.py's REALISTIC_QUERIES, median of 5 after a warm-up). Loki's
results cache is off, so each run is evaluated, not replayed. Loki's peak RSS is its
VmHWM; logstore's process tree is measured by bench/rss.py.

No Loki is installed by this project: neither Debian nor PyPI carries one. How the binary
used for bench/REPORT.md was built is written there, with its commit. Loki runs with its
ingestion limits raised (the defaults, 4 MB/s a tenant, refuse this set) and everything else
as its own local example configuration, minus the pattern ingester, the ruler and the usage
reports.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import dataset  # noqa: E402
from calibrate import Server  # noqa: E402
from ingest import encode, flush, free_port, group_cpu_seconds, push_all  # noqa: E402
from metrics import REALISTIC_QUERIES, realistic_medians  # noqa: E402
from report import machine, table, update_section  # noqa: E402

LOKI_CONFIG = """\
auth_enabled: false
server:
  http_listen_address: 127.0.0.1
  http_listen_port: {port}
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: {grpc}
  log_level: warn
  grpc_server_max_concurrent_streams: 1000
common:
  instance_addr: 127.0.0.1
  path_prefix: {dir}
  storage:
    filesystem:
      chunks_directory: {dir}/chunks
      rules_directory: {dir}/rules
  replication_factor: 1
  ring:
    kvstore:
      store: inmemory
ingester:
  lifecycler:
    min_ready_duration: 0s
    final_sleep: 0s
query_range:
  cache_results: false
limits_config:
  ingestion_rate_mb: 4096
  ingestion_burst_size_mb: 4096
  per_stream_rate_limit: 4096MB
  per_stream_rate_limit_burst: 4096MB
  reject_old_samples: false
schema_config:
  configs:
    - from: 2020-10-24
      store: tsdb
      object_store: filesystem
      schema: v13
      index:
        prefix: index_
        period: 24h
frontend:
  encoding: protobuf
analytics:
  reporting_enabled: false
"""

CONTENT_TYPE = {"json": "application/json", "protobuf": "application/x-protobuf"}


class Loki:
    """A Loki single binary on a fresh directory, for a `with` block."""

    def __init__(self, binary: str) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="loki-bench-"))
        self.port, grpc = free_port(), free_port()
        cfg = self.work / "loki.yaml"
        cfg.write_text(LOKI_CONFIG.format(port=self.port, grpc=grpc, dir=self.work / "data"))
        self.log = open(self.work / "loki.log", "ab")
        (self.work / "data").mkdir()
        # in its data directory: Loki's object store writes chunks and the shipped index
        # relative to the working directory (fake/, index/)
        self.proc = subprocess.Popen([binary, f"-config.file={cfg}"], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=self.work / "data")
        deadline = time.monotonic() + 60
        while self._status("GET", "/ready") != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"Loki did not become ready: see {self.work / 'loki.log'}")
            time.sleep(0.1)

    def _status(self, method: str, path: str) -> int:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
            conn.request(method, path)
            resp = conn.getresponse()
            resp.read()
            return resp.status
        except OSError:
            return 0

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise SystemExit("no VmHWM")

    def _metric_sum(self, name: str) -> float:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and line[len(name)] in " {")

    def flush(self) -> None:
        """POST /flush, then wait until every chunk the ingester made is written: the
        endpoint answers once the flushes are queued, not done."""
        if self._status("POST", "/flush") != 204:
            raise SystemExit("Loki's /flush failed")
        deadline = time.monotonic() + 600
        while (self._metric_sum("loki_ingester_chunks_flushed_total")
               < self._metric_sum("loki_ingester_chunks_created_total")):
            if time.monotonic() > deadline:
                raise SystemExit("Loki's flush did not end")
            time.sleep(0.1)

    def disk_bytes(self) -> int:
        data = self.work / "data"
        return sum(f.stat().st_size for f in data.rglob("*")
                   if f.is_file() and "wal" not in f.relative_to(data).parts[:1])

    def __enter__(self) -> "Loki":
        return self

    def __exit__(self, *exc) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()
        shutil.rmtree(self.work)


def loki_run(binary: str, bodies: dict[str, list[bytes]], lines: int, line_bytes: int,
             end_ns: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for fmt, formatted in bodies.items():
        with Loki(binary) as loki:
            cpu = group_cpu_seconds(loki.proc.pid)  # its own session: the group is Loki
            out[f"{fmt} ingest"] = lines / push_all(loki.port, formatted, CONTENT_TYPE[fmt], 4,
                                                    "/loki/api/v1/push")
            out[f"{fmt} CPU ms / 1,000 lines"] = \
                (group_cpu_seconds(loki.proc.pid) - cpu) * 1e6 / lines
            if fmt == "json":
                loki.flush()
                out["disk / line bytes"] = loki.disk_bytes() / line_bytes
                out.update(realistic_medians(loki.port, end_ns, "/loki"))
                out["peak RSS MB"] = loki.peak_rss_mb()
    return out


def logstore_run(bodies: dict[str, list[bytes]], lines: int, line_bytes: int,
                 end_ns: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for fmt, formatted in bodies.items():
        with Server(ROOT) as server:
            cpu = group_cpu_seconds(server.proc.pid)
            out[f"{fmt} ingest"] = lines / push_all(server.port, formatted, CONTENT_TYPE[fmt],
                                                    4)
            out[f"{fmt} CPU ms / 1,000 lines"] = \
                (group_cpu_seconds(server.proc.pid) - cpu) * 1e6 / lines
            if fmt == "json":
                out["disk / line bytes"] = flush(server.port, server.data)[1] / line_bytes
                out.update(realistic_medians(server.port, end_ns))
    return out


FIGURES = [  # (name, higher is better, format)
    ("json ingest", True, "{:,.0f} lines/s"),
    ("json CPU ms / 1,000 lines", False, "{:.1f} ms"),
    ("protobuf ingest", True, "{:,.0f} lines/s"),
    ("protobuf CPU ms / 1,000 lines", False, "{:.1f} ms"),
    ("disk / line bytes", False, "{:.3f}"),
    *((name, False, "{:,.0f} ms") for name, _, _ in REALISTIC_QUERIES),
    *((f"{name}: answered", None, "{:,.0f}") for name, _, _ in REALISTIC_QUERIES),
    ("peak RSS MB", False, "{:,.0f} MB"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loki", default=os.environ.get("LOKI_BIN"), help="Loki's binary")
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--format", nargs="+", choices=["json", "protobuf"],
                    default=["json", "protobuf"])
    ap.add_argument("--label", help="what the binary is (its -version says nothing when it "
                                      "was built without Loki's release flags)")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    if not args.loki or not os.access(args.loki, os.X_OK):
        raise SystemExit("give Loki's binary: --loki PATH (or LOKI_BIN)")
    version = subprocess.run([args.loki, "-version"], capture_output=True, text=True).stdout
    end_ns = time.time_ns()
    raw = list(dataset.batches(args.lines, 1000, end_ns, True))
    line_bytes = sum(len(v[1].encode()) for b in raw for s in b["streams"] for v in s["values"])
    bodies = {fmt: encode(raw, fmt)[0] for fmt in args.format}
    del raw
    loki_runs, ours = [], []
    for _ in range(args.runs):  # alternated: the sitting drifts between runs
        loki_runs.append(loki_run(args.loki, bodies, args.lines, line_bytes, end_ns))
        print(f"Loki: {loki_runs[-1]}", flush=True)
        ours.append(logstore_run(bodies, args.lines, line_bytes, end_ns))
        print(f"logstore: {ours[-1]}", flush=True)
    rows = []
    for name, higher, fmt in FIGURES:
        theirs = [r[name] for r in loki_runs if name in r]
        mine = [r[name] for r in ours if name in r]
        if not theirs:
            continue
        spread = lambda xs: " / ".join(fmt.format(x) for x in xs)  # noqa: E731
        ratio = ""
        if mine and higher is not None:
            a, b = statistics.median(mine), statistics.median(theirs)
            ratio = f"{(a / b if higher else b / a):.2f}x Loki's"
        rows.append([name.replace("|", "\\|"), spread(theirs), spread(mine) or "(bench/rss.py)",
                     ratio])
    first = args.label or (version.strip().splitlines() or [args.loki])[0]
    body = (f"{machine()}; {args.lines:,} lines of the realistic set (bench/dataset.py), "
            f"1,000-line batches, 4 clients; {first}; runs alternated, Loki first.\n\n"
            f"    .venv/bin/python bench/loki.py --loki PATH --lines {args.lines} "
            f"--runs {args.runs}\n\n"
            + table(["figure", "Loki (each run)", "logstore (each run)", "logstore, median"],
                    rows))
    print(body)
    if not args.no_report:
        update_section("Loki measured here (bench/loki.py)", body)


if __name__ == "__main__":
    main()
