"""A delete request over many streams (issue 22): N pods of 10 lines across the last hour,
a request for one pod's lines among all of them (`{app=~".+"} |= "pod=7 "`, the hour; or
`--query`, e.g. `'{app=~".+"} |= "k=3"'`, a line of every pod), and
the compactor's processing of it once the cancel period is over, timed, with the writer's
commits; with --sealed, every line is sealed into blocks first; with --clickhouse, on
ClickHouse's embedded engine.

    .venv/bin/python bench/delete_request.py [--streams 20000] [--sealed | --clickhouse]
                                             [--query LOGQL]

In-process (the app under Litestar's test client, as the tests run it); prints a line and
writes nothing to bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NS = 10**9
H = 3600 * NS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=20000)
    ap.add_argument("--sealed", action="store_true")
    ap.add_argument("--clickhouse", action="store_true",
                    help="storage.backend: clickhouse on the embedded engine (chdb)")
    ap.add_argument("--query", default='{app=~".+"} |= "pod=7 "',
                    help="the delete request's query (default: one pod's lines)")
    args = ap.parse_args()
    from litestar.testing import TestClient

    import config as config_module
    from app import create_app

    work = Path(tempfile.mkdtemp(prefix="logstore-delete-"))
    cfg = {"common": {"path_prefix": str(work / "data")}, "server": {"log_level": "warn"},
           "compactor": {"retention_enabled": True, "delete_request_cancel_period": "0s"}}
    if args.clickhouse:
        cfg["storage"] = {"backend": "clickhouse",
                          "clickhouse": {"url": f"chdb://{work / 'ch'}"}}
    now = time.time_ns()
    with TestClient(create_app(config_module.config_from_dict(cfg))) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.stop)
        for first in range(0, args.streams, 500):
            streams = [{"stream": {"app": f"a{i % 50}", "pod": f"pod-{i}"},
                        "values": [[str(now - H + k * 300 * NS + i), f"level=info pod={i} k={k}"]
                                   for k in range(10)]}
                       for i in range(first, min(first + 500, args.streams))]
            r = c.post("/logstore/api/v1/push", content=json.dumps({"streams": streams}),
                       headers={"Content-Type": "application/json"})
            assert r.status_code == 204, r.text
        if args.sealed:
            assert c.post("/flush").status_code == 204
        r = c.post("/logstore/api/v1/delete", params={
            "query": args.query, "start": str((now - 2 * H) // NS),
            "end": str(now // NS)})
        assert r.status_code == 204, r.text
        commits = ctx.db.commits
        began = time.perf_counter()
        removed = c.blocking_portal.call(ctx.compactor.run_once)
        took = time.perf_counter() - began
        r = c.get("/logstore/api/v1/query", params={
            "query": f"sum(count_over_time({args.query} [3h]))", "time": str(now // NS + 1)})
        left = r.json()["data"]["result"]
        left = int(left[0]["value"][1]) if left else 0
    where = ", sealed" if args.sealed else ", ClickHouse" if args.clickhouse else ""
    print(f"{args.streams:,} streams{where}: {removed} lines removed "
          f"in {took:.2f} s, {ctx.db.commits - commits} commits, {left} matching lines left")


if __name__ == "__main__":
    main()
