"""The benchmark data set: loghub samples replayed to N lines over the last 24 h.

32 streams of real logs (16 loghub systems x 2 hosts) plus two synthetic ones for parser
benchmarks (`job="app"` in logfmt with a `latency` field, `job="web"` in JSON with a
`status`). Timestamps rise evenly across [end - 24h, end). Every 200,000th line carries the
rare needle `needle-0c0ffee`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Iterator

LOGHUB = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "loghub"
SYSTEMS = ["Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "HealthApp", "Linux", "Mac",
           "OpenSSH", "OpenStack", "Proxifier", "Spark", "Thunderbird", "Windows", "Zookeeper"]
HOSTS = ["host-a", "host-b"]
DAY_NS = 86400 * 10**9
RARE_NEEDLE = "needle-0c0ffee"
RARE_EVERY = 200_000
# what the synthetic generators draw from (weights by repetition)
_LEVELS = ["info"] * 90 + ["warn"] * 6 + ["error"] * 4
_STATUSES = [200] * 40 + [201, 204, 301, 404, 500, 502, 503]


def _synthetic(kind: str, count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    paths = ["/api/users", "/api/orders", "/health", "/login", "/static/app.js"]
    out = []
    for _ in range(count):
        level, path = rng.choice(_LEVELS), rng.choice(paths)
        status = rng.choice(_STATUSES)
        latency = round(rng.lognormvariate(-3, 1), 4)
        if kind == "logfmt":
            out.append(f'level={level} method=GET path={path} status={status} '
                       f'latency={latency} msg="request served"')
        else:
            out.append(json.dumps({"level": level, "method": "POST", "path": path,
                                   "status": status, "latency": latency,
                                   "user": {"id": rng.randint(1, 500)}}))
    return out


def streams() -> list[tuple[dict[str, str], list[str]]]:
    if not LOGHUB.exists():
        raise SystemExit(f"loghub samples not found at {LOGHUB}")
    out = []
    for system in SYSTEMS:
        lines = (LOGHUB / system / f"{system}_2k.log").read_text(
            encoding="utf-8", errors="replace").splitlines()
        for host in HOSTS:
            out.append(({"job": system.lower(), "host": host, "env": "bench"}, lines))
    for host in HOSTS:
        out.append(({"job": "app", "host": host, "env": "bench"}, _synthetic("logfmt", 2000, 1)))
        out.append(({"job": "web", "host": host, "env": "bench"}, _synthetic("json", 2000, 2)))
    return out


# -- the realistic set (issue 25): the widths and shapes real services log -------------------
# 30 streams: 18 of loghub replays (60 % of the lines), 6 of logfmt with 8 fields (20 %), 6 of
# nested JSON (20 %); about 167 bytes a line, as the set the issue measured Loki on
REALISTIC_LOGHUB = SYSTEMS[:9]
REALISTIC_HOSTS = [f"host-{i}" for i in range(6)]
_POOL = 20_000  # distinct synthetic lines per stream, cycled


def _logfmt_lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    methods = ["GET"] * 6 + ["POST"] * 3 + ["DELETE"]
    paths = ["/api/v1/orders", "/api/v1/users", "/api/v1/items", "/healthz", "/login",
             "/api/v1/search", "/static/app.js", "/api/v2/checkout"]
    msgs = ["request served", "request failed", "cache miss, fetched from origin",
            "slow upstream response", "user session refreshed"]
    out = []
    for i in range(count):
        status = rng.choice(_STATUSES)
        out.append(f"ts=2026-11-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}."
                   f"{rng.randint(0, 999):03d}Z level={rng.choice(_LEVELS)} "
                   f"method={rng.choice(methods)} path={rng.choice(paths)}/{rng.randint(1, 99999)} "
                   f"status={status} latency_ms={round(rng.lognormvariate(3, 1), 2)} "
                   f"user=u{rng.randint(1, 5000)} msg=\"{rng.choice(msgs)}\"")
    return out


def _json_lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    agents = ["Mozilla/5.0 (X11; Linux x86_64)", "curl/8.4.0", "Go-http-client/1.1",
              "okhttp/4.12.0"]
    out = []
    for i in range(count):
        status = rng.choice(_STATUSES)
        out.append(json.dumps({
            "level": rng.choice(_LEVELS), "status": status,
            "request": {"method": rng.choice(["GET", "POST", "PUT"]),
                        "path": f"/api/orders/{rng.randint(1, 99999)}",
                        "headers": {"user_agent": rng.choice(agents)}},
            "latency_ms": round(rng.lognormvariate(3, 1), 2),
            "user": {"id": rng.randint(1, 5000), "org": {"id": rng.randint(1, 50)}},
            "msg": "order updated" if status < 500 else "upstream error",
            "trace_id": f"{rng.getrandbits(128):032x}"},
            separators=(",", ":")))
    return out


def realistic_streams() -> list[tuple[dict[str, str], list[str]]]:
    if not LOGHUB.exists():
        raise SystemExit(f"loghub samples not found at {LOGHUB}")
    out = []
    for system in REALISTIC_LOGHUB:
        lines = (LOGHUB / system / f"{system}_2k.log").read_text(
            encoding="utf-8", errors="replace").splitlines()
        for host in HOSTS:
            out.append(({"job": system.lower(), "host": host, "env": "bench"}, lines))
    for i, host in enumerate(REALISTIC_HOSTS):
        out.append(({"job": "app", "host": host, "env": "bench"}, _logfmt_lines(_POOL, i)))
    for i, host in enumerate(REALISTIC_HOSTS):
        out.append(({"job": "api", "host": host, "env": "bench"},
                    _json_lines(_POOL, 100 + i)))
    return out


def batches(total: int, batch: int, end_ns: int, realistic: bool = False) -> Iterator[dict]:
    """Push bodies (JSON-ready dicts) of `batch` lines each, oldest first."""
    sources = realistic_streams() if realistic else streams()
    step = DAY_NS // total
    start = end_ns - DAY_NS
    n_streams = len(sources)
    for first in range(0, total, batch):
        per_stream: dict[int, list[list[str]]] = {}
        for i in range(first, min(first + batch, total)):
            s = i % n_streams
            labels, lines = sources[s]
            line = lines[(i // n_streams) % len(lines)]
            if i % RARE_EVERY == RARE_EVERY // 2:
                line = f"{line} {RARE_NEEDLE}"
            per_stream.setdefault(s, []).append([str(start + i * step), line])
        yield {"streams": [{"stream": sources[s][0], "values": values}
                           for s, values in per_stream.items()]}
