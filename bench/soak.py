"""Soak: mixed pushes, queries, a live tail and rule evaluation against one server for a
bounded time, with two SIGKILL-and-restart cycles, a phase of four heavy queries, and ten
hostile requests at once at the end (issue 15). Its data stays in a `/tmp/soak-*` directory
for bench/hostile.py.

    .venv/bin/python bench/soak.py --seconds 600

Reports: acknowledged lines lost across the kills (must be 0); one-line push latency p50/p99
without and with four heavy `quantile_over_time` queries; the server's RSS (whole process
tree) after warm-up and at the end; the peak RSS while ten hostile requests (a gzip bomb, a
snappy bomb, `repeat` and `printf` templates, 10,000 labels, deep nesting, a century-long
range, huge regexes) run at once. Loopback only; everything is bounded by --seconds.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import snappy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from ingest import free_port, start_server  # noqa: E402
from report import machine, table, update_section  # noqa: E402
from rss import tree_rss_kb  # noqa: E402

NS = 10**9
PUSH = "/logstore/api/v1/push"
RULES = """
name: soak
interval: 5s
rules:
  - record: soak:lines:rate1m
    expr: sum by (pusher) (rate({job="soak"}[1m]))
  - alert: SoakErrors
    expr: sum(count_over_time({job="soak"} |= "level=error" [1m])) > 0
    for: 10s
"""
HEAVY = 'quantile_over_time(0.99, {job="heavy"} | logfmt | unwrap v [10m]) by (job)'
CONFIG = ("ruler:\n  evaluation_interval: 5s\npattern_ingester:\n  enabled: true\n"
          "limits_config:\n  query_timeout: 30s\n  reject_old_samples: false\n")


class Server:
    def __init__(self, work: Path):
        self.data = work / "data"
        self.port = free_port()
        self.proc = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = start_server(self.data, self.port, CONFIG)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(60)

    def rss_mb(self) -> float:
        return tree_rss_kb(os.getpgid(self.proc.pid)) / 1024


class Pusher(threading.Thread):
    """Pushes batches of 100 lines; remembers which were acknowledged (204)."""

    def __init__(self, url: str, name: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.url, self.name, self.stop = url, name, stop
        self.acked = 0
        self.batch = 0

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as c:
            while not self.stop.is_set():
                self.batch += 1
                now = time.time_ns()
                values = [[str(now + i), f"level={'error' if i == 0 else 'info'} "
                           f"pusher={self.name} batch={self.batch} i={i}"] for i in range(100)]
                try:
                    r = c.post(PUSH, json={"streams": [{"stream": {
                        "job": "soak", "pusher": self.name}, "values": values}]})
                except httpx.HTTPError:
                    time.sleep(0.2)   # the server is being restarted
                    continue
                if r.status_code == 204:
                    self.acked += 100
                time.sleep(0.02)


def probe_latency(url: str, seconds: float) -> list[float]:
    """One-line pushes every 10 ms; their latencies in ms."""
    out = []
    with httpx.Client(base_url=url, timeout=60) as c:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            r = c.post(PUSH, json={"streams": [{"stream": {"job": "probe"}, "values": [
                [str(time.time_ns()), "probe"]]}]})
            if r.status_code == 204:
                out.append((time.perf_counter() - t) * 1000)
            time.sleep(0.01)
    return sorted(out)


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(len(values) * p))] if values else float("nan")


def light_queries(url: str, stop: threading.Event, counts: dict) -> None:
    qs = ['sum by (pusher) (count_over_time({job="soak"}[1m]))', '{job="soak"} |= "i=7"',
          'topk(3, sum by (pusher) (rate({job="soak"} |= "error" [30s])))']
    with httpx.Client(base_url=url, timeout=60) as c:
        while not stop.is_set():
            now = time.time_ns()
            try:
                r = c.get("/logstore/api/v1/query_range", params={
                    "query": random.choice(qs), "start": str(now - 300 * NS), "end": str(now),
                    "limit": "50"})
                counts[r.status_code] = counts.get(r.status_code, 0) + 1
            except httpx.HTTPError:
                time.sleep(0.2)
            time.sleep(0.3)


def tail(url: str, stop: threading.Event, counts: dict) -> None:
    import asyncio

    import websockets

    async def run() -> None:
        ws_url = url.replace("http://", "ws://") + "/logstore/api/v1/tail?" + \
            "query=%7Bjob%3D%22soak%22%2C%20pusher%3D%22p0%22%7D"
        while not stop.is_set():
            try:
                async with websockets.connect(ws_url, max_size=None) as ws:
                    while not stop.is_set():
                        frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
                        counts["frames"] = counts.get("frames", 0) + 1
                        counts["entries"] = counts.get("entries", 0) + sum(
                            len(s["values"]) for s in frame.get("streams", []))
            except Exception:  # noqa: BLE001 - reconnect after a restart or an idle wait
                await asyncio.sleep(0.5)
    asyncio.run(run())


def heavy_data(url: str) -> None:
    now = time.time_ns()
    start = now - 3600 * NS
    with httpx.Client(base_url=url, timeout=120) as c:
        for b in range(0, 300_000, 10_000):
            values = [[str(start + (b + i) * 12_000_000), f"v={random.random() * 100:.3f}"]
                      for i in range(10_000)]
            r = c.post(PUSH, json={"streams": [{"stream": {"job": "heavy"}, "values": values}]})
            assert r.status_code == 204, r.text


def heavy_queries(url: str, seconds: float) -> list[float]:
    latencies: list[float] = []
    end = time.monotonic() + seconds

    def one() -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            while time.monotonic() < end:
                now = time.time_ns()
                t = time.perf_counter()
                c.get("/logstore/api/v1/query_range", params={
                    "query": HEAVY, "start": str(now - 3600 * NS), "end": str(now),
                    "step": "1"})
                latencies.append(time.perf_counter() - t)

    workers = [threading.Thread(target=one) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return latencies


def hostile_requests(url: str, only: list[int] | None = None) -> list[tuple[str, int]]:
    now = time.time_ns()
    rng = {"start": str(now - 3600 * NS), "end": str(now)}
    labels = {f"l{i}": "v" * 10 for i in range(10_000)}
    requests = [
        ("gzip bomb (100 MiB of zeros)", "post", PUSH,
         {"content": gzip.compress(b"\0" * (101 << 20), 1),
          "headers": {"Content-Type": "application/json", "Content-Encoding": "gzip"}}),
        ("snappy bomb (1 GiB declared)", "post", PUSH,
         {"content": snappy.compress(b"\0" * (120 << 20)),
          "headers": {"Content-Type": "application/x-protobuf"}}),
        ("repeat 16 MiB per line", "get", "/logstore/api/v1/query_range",
         {"params": {"query": '{job="soak"} | line_format "{{ repeat 15000000 \\"x\\" }}"',
                     "limit": "1000", **rng}}),
        ("printf width 1e9", "get", "/logstore/api/v1/query_range",
         {"params": {"query": '{job="soak"} | line_format "{{ printf \\"%0999999999d\\" 1 }}"',
                     **rng}}),
        ("10,000 labels", "post", PUSH,
         {"json": {"streams": [{"stream": labels, "values": [[str(now), "x"]]}]}}),
        ("sum( nested 3000 deep", "get", "/logstore/api/v1/query",
         {"params": {"query": "sum(" * 3000 + 'count_over_time({job="soak"}[1m])' + ")" * 3000}}),
        ("[999999h] at step 1m", "get", "/logstore/api/v1/query_range",
         {"params": {"query": 'sum(count_over_time({job="soak"}[999999h]))', "step": "60",
                     **rng}}),
        ("regex of 5000 alternatives", "get", "/logstore/api/v1/query_range",
         {"params": {"query": '{job="soak"} |~ "' + "|".join(f"w{i}x" for i in range(5000))
                     + '"', **rng}}),
        ("regex (a{1000}){1000}", "get", "/logstore/api/v1/query_range",
         {"params": {"query": '{job="soak"} |~ "(a{1000}){1000}"', **rng}}),
        ("5000 lines through logfmt and line_format", "get", "/logstore/api/v1/query_range",
         {"params": {"query": '{job="soak"} | logfmt | line_format "{{ . }}"', "limit": "5000",
                     **rng}}),
    ]
    if only is not None:
        requests = [requests[k] for k in only]
    results: list[tuple[str, int]] = [("", 0)] * len(requests)

    def send(k: int) -> None:
        name, method, path, kw = requests[k]
        try:
            r = httpx.request(method.upper(), url + path, timeout=120, **kw)
            results[k] = (name, r.status_code)
        except httpx.HTTPError as exc:
            results[k] = (name, -1 if "timed out" in str(exc) else -2)

    threads = [threading.Thread(target=send, args=(k,)) for k in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    total = args.seconds
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    srv = Server(work)
    srv.start()
    began = time.monotonic()
    r = httpx.post(srv.url + "/logstore/api/v1/rules/soak", content=RULES,
                   headers={"Content-Type": "application/yaml"})
    assert r.status_code == 202, r.text
    heavy_data(srv.url)
    stop = threading.Event()
    pushers = [Pusher(srv.url, f"p{i}", stop) for i in range(2)]
    query_counts: dict = {}
    tail_counts: dict = {}
    background = [*pushers, threading.Thread(target=light_queries, daemon=True,
                                             args=(srv.url, stop, query_counts)),
                  threading.Thread(target=tail, daemon=True, args=(srv.url, stop, tail_counts))]
    for t in background:
        t.start()
    kills = []
    for at in (0.15, 0.30):                      # two SIGKILL-and-restart cycles
        time.sleep(max(0.0, began + at * total - time.monotonic()))
        srv.kill()
        kills.append(time.monotonic() - began)
        srv.start()
    time.sleep(max(0.0, began + 0.40 * total - time.monotonic()))
    rss_warm = srv.rss_mb()
    phase = max(20.0, 0.1 * total)
    idle = probe_latency(srv.url, phase)
    heavy: list[float] = []
    heavy_thread = threading.Thread(target=lambda: heavy.extend(heavy_queries(srv.url,
                                                                              phase + 5)))
    heavy_thread.start()
    time.sleep(3)
    busy = probe_latency(srv.url, phase)
    heavy_thread.join()
    time.sleep(max(0.0, began + 0.95 * total - time.monotonic()))
    stop.set()
    for p in pushers:
        p.join()
    rss_end = srv.rss_mb()
    now = time.time_ns()
    found: dict[str, int] = {}
    r = httpx.get(srv.url + "/logstore/api/v1/query", params={
        "query": 'sum by (pusher) (count_over_time({job="soak"}[2h]))', "time": str(now)},
        timeout=120)
    for s in r.json()["data"]["result"]:
        found[s["metric"]["pusher"]] = int(s["value"][1])
    lost = sum(max(0, p.acked - found.get(p.name, 0)) for p in pushers)
    acked = sum(p.acked for p in pushers)

    peak = [0.0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], srv.rss_mb())
            sampling.wait(0.05)

    before_hostile = srv.rss_mb()
    sampler = threading.Thread(target=sample)
    sampler.start()
    hostile = hostile_requests(srv.url)
    sampling.set()
    sampler.join()
    alive = httpx.get(srv.url + "/ready").status_code
    srv.stop()
    elapsed = time.monotonic() - began

    rows = [
        ["run (loopback, 2 pushers of 100-line batches, light queries, a tail, 2 rules at 5s)",
         f"{elapsed:.0f} s"],
        ["SIGKILL and restart", f"at {kills[0]:.0f} s and {kills[1]:.0f} s"],
        ["lines acknowledged / found after the kills", f"{acked:,} / {sum(found.values()):,}"],
        ["acknowledged lines lost", f"**{lost}**"],
        ["one-line push latency, p50 / p99, no heavy query",
         f"{pct(idle, .5):.1f} / {pct(idle, .99):.1f} ms ({len(idle)} pushes)"],
        ["the same with 4 heavy quantile_over_time queries running",
         f"{pct(busy, .5):.1f} / {pct(busy, .99):.1f} ms ({len(busy)} pushes; each query "
         f"{statistics.median(heavy) if heavy else float('nan'):.1f} s)"],
        ["RSS of the process tree after warm-up / at the end",
         f"{rss_warm:.0f} / {rss_end:.0f} MB ({(rss_end / rss_warm - 1) * 100:+.0f}%)"],
        ["light queries answered (status: count)",
         ", ".join(f"{k}: {v}" for k, v in sorted(query_counts.items()))],
        ["tail frames / entries received", f"{tail_counts.get('frames', 0)} / "
                                           f"{tail_counts.get('entries', 0)}"],
        ["RSS before / peak during 10 hostile requests at once",
         f"{before_hostile:.0f} / {peak[0]:.0f} MB"],
        ["server ready after them", "yes" if alive == 200 else f"no ({alive})"],
    ]
    hostile_rows = [[name, status] for name, status in hostile]
    body = (f"Command: `.venv/bin/python bench/soak.py --seconds {total}`\n\n"
            f"Machine: {machine()}; client and server share it.\n\n"
            + table(["measure", "value"], rows) + "\n\n"
            + table(["hostile request (all ten at once)", "status"], hostile_rows))
    print(body)
    if not args.no_report:
        update_section("Soak: mixed load, kills, heavy and hostile requests (bench/soak.py)",
                       body)


if __name__ == "__main__":
    main()
