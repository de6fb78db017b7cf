"""What timing a request for /metrics costs: app.py's middleware around an app that only
answers 204, against that app alone, in one process (no server, no sockets).

    PYTHONPATH=. .venv/bin/python bench/request_metrics.py [--requests 200000] [--runs 5]

Prints the median over `--runs` of the microseconds the middleware adds to one request
(a push to /logstore/api/v1/push, so the route name, the histogram and the status are all
on the path a real push takes). Figures go to bench/REPORT.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from routes.timing import timed  # noqa: E402
from services.runtime.metrics import Metrics  # noqa: E402


async def answer(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def receive() -> dict:
    return {"type": "http.request", "body": b"", "more_body": False}


async def sent(message) -> None:
    pass


async def per_request(app, scope, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await app(scope, receive, sent)
    return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    # what Litestar's router leaves in the scope of a routed push
    scope = {"type": "http", "method": "POST", "path": "/loki/api/v1/push",
             "path_template": "/loki/api/v1/push", "path_params": {}}
    metrics = Metrics(lambda: 0, lambda: 0, build={"version": "b"}, loki_build={"version": "b"})
    app = timed(answer, metrics)
    added = []
    for _ in range(args.runs):
        bare = asyncio.run(per_request(answer, scope, args.requests))
        full = asyncio.run(per_request(app, scope, args.requests))
        added.append(full - bare)
    print(f"middleware adds {statistics.median(added):.2f} us per request "
          f"(runs: {', '.join(f'{a:.2f}' for a in added)})")


if __name__ == "__main__":
    main()
