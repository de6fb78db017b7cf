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


def _synthetic(kind: str, count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    levels = ["info"] * 90 + ["warn"] * 6 + ["error"] * 4
    paths = ["/api/users", "/api/orders", "/health", "/login", "/static/app.js"]
    out = []
    for _ in range(count):
        level, path = rng.choice(levels), rng.choice(paths)
        status = rng.choice([200] * 40 + [201, 204, 301, 404, 500, 502, 503])
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


def batches(total: int, batch: int, end_ns: int) -> Iterator[dict]:
    """Push bodies (JSON-ready dicts) of `batch` lines each, oldest first."""
    sources = streams()
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
