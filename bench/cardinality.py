"""Many streams: every read that starts from matchers, at 1,000 to 100,000 streams.

    .venv/bin/python bench/cardinality.py [--streams 1000 5000 20000 100000] [--runs 3]
                                          [--churn] [--only NAME ...] [--no-sealing] [--no-report]

The shape of a Kubernetes cluster (issue 22): N streams
`{env="prod", app="a<i%50>", pod="pod-<i>"}` of 10 logfmt lines each (8 fields, the pod's
number among them), pushed 500 streams to a request, spread over the last 50 minutes. Each
read runs `--runs` times against a real `logstore serve`; the table gives the best time, the
status, the server's RSS after all reads and the data directory's size. The pattern
ingester is off, as in Loki by default (it would add its mining to the push figure), so
`/patterns` is not in the table: it is one statement over the matched stream ids.

`--churn`: every stream lives for one slice of the hour (pods replaced as they go), so a
push always brings 500 streams never seen before and a query over the last 5 minutes matches
only the newest ones while the index holds all N.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from background import wait_for_background  # noqa: E402
from ingest import add_workers_flag, free_port, start_server, workers_config  # noqa: E402
from report import machine, table, update_section  # noqa: E402

TENANT = "bench"
PUSH_STREAMS = 500
LINES_PER_STREAM = 10
SPAN_NS = 50 * 60 * 10**9
TIMEOUT_S = 120
# the server's own query_timeout: long enough to see how long the slow reads really take
# max_query_series raised: logstore holds /series to it as to metric results, and the bench
# wants the whole answer at every size
CONFIG = ("auth_enabled: true\nlimits_config:\n  query_timeout: 10m\n"
          "  max_query_series: 1000000\n"
          "querier:\n  multi_tenant_queries_enabled: true\n"
          "pattern_ingester:\n  enabled: false\n")

# Loki 3.7.6 on the same 2-core machine class, measured externally for issue 22 (its table):
# reads at 5,000 / 20,000 / 100,000 streams, best of 3, ms.
LOKI_MS = {
    "series {env}": (21, 66, 423),
    "sum by (app) count_over_time": (124, 1250, 8500),
    "filter |= pod=19999, limit 100": (21, 124, 643),
    "one pod": (3.5, 3.4, 3.2),
    "labels": (1.6, 1.6, 1.4),
    "label pod values": (4.0, 14.7, 110),
    "push (all streams)": (340, 1980, 7600),
}


def line(i: int, k: int, ts_ns: int) -> str:
    level = "error" if (i + k) % 17 == 0 else "info"
    return (f'ts={ts_ns // 10**9} level={level} app=a{i % 50} pod={i} method=GET '
            f'path=/api/v1/items/{k} status={500 if level == "error" else 200} '
            f'latency_ms={(i * 7 + k * 13) % 900} msg="request served"')


def bodies(n: int, now: int, churn: bool) -> list[bytes]:
    """Push bodies of PUSH_STREAMS streams each."""
    out = []
    pushes = (n + PUSH_STREAMS - 1) // PUSH_STREAMS
    for p in range(pushes):
        streams = []
        for i in range(p * PUSH_STREAMS, min(n, (p + 1) * PUSH_STREAMS)):
            if churn:  # this push's pods live only in its own slice of the span
                lo = now - SPAN_NS + SPAN_NS * p // pushes
                width = SPAN_NS // pushes
            else:
                lo, width = now - SPAN_NS, SPAN_NS
            values = []
            for k in range(LINES_PER_STREAM):
                ts = lo + width * k // LINES_PER_STREAM + i % 1000
                values.append([str(ts), line(i, k, ts)])
            streams.append({"stream": {"env": "prod", "app": f"a{i % 50}", "pod": f"pod-{i}"},
                            "values": values})
        out.append(json.dumps({"streams": streams}).encode())
    return out


def reads(n: int, now: int) -> list[tuple[str, str, dict]]:
    hour = {"start": str(now - 3600 * 10**9), "end": str(now + 10**9)}
    last5 = {"start": str(now - 300 * 10**9), "end": str(now + 10**9)}
    probe = n - 1
    v1 = "/logstore/api/v1"
    return [
        ("series {env}", f"{v1}/series", {"match[]": '{env="prod"}', **hour}),
        ("series {env}, last 5 min", f"{v1}/series", {"match[]": '{env="prod"}', **last5}),
        ("sum by (app) count_over_time", f"{v1}/query_range",
         {"query": 'sum by (app) (count_over_time({env="prod"}[5m]))', "step": "60", **hour}),
        ("sum by (app) count_over_time |= error (scan)", f"{v1}/query_range",
         {"query": 'sum by (app) (count_over_time({env="prod"} |= "level=error" [5m]))',
          "step": "60", **hour}),
        ("instant sum by (app) rate 1h", f"{v1}/query",
         {"query": 'sum by (app) (rate({env="prod"}[1h]))', "time": hour["end"]}),
        ("filter |= pod=<last>, limit 100", f"{v1}/query_range",
         {"query": f'{{env="prod"}} |= "pod={probe} "', "limit": "100", **hour}),
        ("selector {env}, limit 100", f"{v1}/query_range",
         {"query": '{env="prod"}', "limit": "100", **hour}),
        ("one pod", f"{v1}/query_range", {"query": '{pod="pod-777"}', "limit": "100", **hour}),
        ("labels", f"{v1}/labels", hour),
        ("label pod values", f"{v1}/label/pod/values", hour),
        ("label pod values {app=a7}", f"{v1}/label/pod/values",
         {"query": '{app="a7"}', **hour}),
        ("index/stats", f"{v1}/index/stats", {"query": '{env="prod"}', **hour}),
        ("index/volume by app", f"{v1}/index/volume",
         {"query": '{env="prod"}', "targetLabels": "app", **hour}),
        ("index/volume_range", f"{v1}/index/volume_range",
         {"query": '{env="prod"}', "step": "300", **hour}),
        ("detected_labels", f"{v1}/detected_labels", {"query": '{env="prod"}', **hour}),
        ("detected_fields", f"{v1}/detected_fields", {"query": '{env="prod"}', **hour}),
        ("multi-tenant series", f"{v1}/series",
         {"match[]": '{env="prod"}', **hour, "_tenant": f"{TENANT}|other"}),
    ]


def request(port: int, method: str, path: str, params: dict | None = None,
            body: bytes | None = None) -> tuple[int, bytes]:
    params = dict(params or {})
    tenant = params.pop("_tenant", TENANT)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    headers = {"X-Scope-OrgID": tenant}
    if body is not None:
        headers["Content-Type"] = "application/json"
    url = path + ("?" + urlencode(params) if params else "")
    try:
        conn.request(method, url, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except TimeoutError:
        return 0, b"client timeout"
    finally:
        conn.close()


def rss_kb(pid: int, field: str) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(field + ":"):
            return int(row.split()[1])
    return 0


def server_pid(proc) -> int:
    """The process that serves (granian runs the app in a worker child)."""
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    kids = children.read_text().split() if children.exists() else []
    return int(kids[0]) if kids else proc.pid


def profiled(pid: int, name: str, out: Path):
    """py-spy record of the server while one read runs (`--profile NAME`)."""
    import subprocess
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen([spy, "record", "-p", str(pid), "-o", str(out), "-f", "raw",
                             "-r", "200", "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_one(n: int, runs: int, churn: bool, only: list[str],
            profile: str | None = None, keep: Path | None = None,
            sealing: bool = True) -> dict:
    work = keep / f"{n}{'-churn' if churn else ''}" if keep else \
        Path(tempfile.mkdtemp(prefix="logstore-card-"))
    data = work / "data"
    reuse = (data / "logstore.db").exists()
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = start_server(data, port, CONFIG)
    out: dict = {"streams": n, "reads": {}}
    try:
        stamp = work / "pushed-at"
        now = int(stamp.read_text()) if reuse and stamp.exists() else time.time_ns()
        pushes = [] if reuse else bodies(n, now, churn)
        spy = None
        if profile == "push":
            spy = profiled(server_pid(proc), profile, Path(f"/tmp/card-{n}-push.txt"))
        t0 = time.perf_counter()
        for body in pushes:
            status, text = request(port, "POST", "/logstore/api/v1/push", body=body)
            if status != 204:
                raise SystemExit(f"push failed: {status} {text[:200]!r}")
        out["push_s"] = time.perf_counter() - t0 if pushes else float("nan")
        stamp.write_text(str(now))
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait()
        # the sealer moves the closed hour's lines into blocks first: reads are timed on
        # the store at rest, as the query bench does (with it off, every line stays in the
        # head, as in an hour not yet closed)
        if sealing:
            wait_for_background(data / "logstore.db")
        planned = reads(n, now)
        names = {name for name, _, _ in planned}
        for name, path, params in planned:
            if only and not any(o == name or o in name and o not in names for o in only):
                continue
            best, status, size = None, None, 0
            spy = None
            if profile and (profile == name or profile in name and profile not in names):
                spy = profiled(server_pid(proc), name, Path(f"/tmp/card-{n}-{profile.replace('/', '_')}.txt"))
            for _ in range(runs):
                t = time.perf_counter()
                status, text = request(port, "GET", path, params)
                took = time.perf_counter() - t
                size = len(text)
                if status != 200:
                    best = took
                    print(f"  {name}: {status} {text[:160]!r}", file=sys.stderr)
                    break
                best = took if best is None else min(best, took)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait()
            out["reads"][name] = (best, status, size)
            print(f"  {n:>7} {name:<45} {best * 1000:9.1f} ms  {status}", file=sys.stderr)
        pid = server_pid(proc)
        out["rss_mb"] = rss_kb(pid, "VmHWM") / 1024
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    out["disk_mb"] = sum(f.stat().st_size for f in data.iterdir() if f.is_file()) / 1e6
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return out


def fmt_ms(s: float) -> str:
    ms = s * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[1000, 5000, 20000, 100000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--churn", action="store_true")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--profile", help="py-spy record the server during reads whose name "
                    "contains this (or 'push'), into /tmp/card-N-NAME.txt (collapsed stacks)")
    ap.add_argument("--keep", type=Path, help="keep each data set under KEEP/N and read it "
                    "again on the next run instead of pushing (for profiling)")
    ap.add_argument("--no-sealing", action="store_true",
                    help="storage.sealing_enabled: false, every line read from the head "
                         "(implies --no-report: the report's tables are of the store at rest)")
    ap.add_argument("--stream-limit", type=int, default=0, metavar="N",
                    help="limits_config.max_global_streams_per_user: N, as a Loki user with "
                         "that many streams must raise it (implies --no-report)")
    ap.add_argument("--no-report", action="store_true")
    add_workers_flag(ap)
    args = ap.parse_args()
    global CONFIG
    CONFIG += workers_config(args.workers)
    if args.no_sealing:
        CONFIG += "storage:\n  sealing_enabled: false\n"
        args.no_report = True
    if args.stream_limit:
        CONFIG = CONFIG.replace("limits_config:\n", "limits_config:\n  "
                                f"max_global_streams_per_user: {args.stream_limit}\n")
        args.no_report = True
    results = [run_one(n, args.runs, args.churn, args.only, args.profile, args.keep,
                       sealing=not args.no_sealing) for n in args.streams]
    names = list(results[0]["reads"])
    headers = ["read"] + [f"{r['streams']:,} streams" for r in results]
    rows = []
    for name in names:
        row = [name]
        for r in results:
            took, status, _ = r["reads"][name]
            row.append(fmt_ms(took) + ("" if status == 200 else f" ({status})"))
        rows.append(row)
    rows.append(["push of all streams (500 a request)"] + [fmt_ms(r["push_s"]) for r in results])
    rows.append(["server peak RSS, MB"] + [f"{r['rss_mb']:.0f}" for r in results])
    rows.append(["data directory, MB"] + [f"{r['disk_mb']:.1f}" for r in results])
    text = table(headers, rows)
    print(text)
    if args.no_report:
        return
    variant = "high churn" if args.churn else "steady"
    cmd = ("`.venv/bin/python bench/cardinality.py --streams "
           + " ".join(str(n) for n in args.streams) + f" --runs {args.runs}"
           + (" --churn" if args.churn else "") + "`")
    update_section(
        f"Cardinality, {variant} (bench/cardinality.py)",
        f"Command: {cmd}\n\nMachine: {machine()}; client and server share it. Times in ms, "
        f"best of {args.runs}; pods of 10 logfmt lines, 50 apps, "
        f"{'each push 500 new pods in its own slice of the hour' if args.churn else 'all pods across the last 50 minutes'}."
        f"\n\n{text}")


if __name__ == "__main__":
    main()
