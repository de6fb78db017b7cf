"""Retention sweeps over many streams in the SQLite file (issue 22): N pods of one tenant
under a 3-day retention_period, each with a line 5 days old and two sealed into one block
that straddles the cutoff (kept whole until the cutoff passes its end), then three sweeps
with the compactor's clock at the cutoff, 10 minutes later and an hour later: the first
removes the old lines, the second has nothing to remove, the third removes the straddling
blocks. Each sweep timed, with the writer's commits it made.

    .venv/bin/python bench/retention_sweep.py [--streams 20000]

In-process (the app under Litestar's test client, as the tests run it); prints a table and
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
MINUTE = 60 * NS
H = 3600 * NS
D = 24 * H


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=20000)
    args = ap.parse_args()
    from litestar.testing import TestClient

    import config as config_module
    from app import create_app

    work = Path(tempfile.mkdtemp(prefix="logstore-sweep-"))
    cfg = {"common": {"path_prefix": str(work / "data")},
           "server": {"log_level": "warn"},
           "limits_config": {"reject_old_samples": False, "retention_period": "3d"},
           "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"}}
    now = time.time_ns()
    hour = now - now % H
    cutoff = hour - 3 * D + 30 * MINUTE  # mid-window: the lines around it share a block
    with TestClient(create_app(config_module.config_from_dict(cfg))) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.stop)
        for first in range(0, args.streams, 500):
            streams = [{"stream": {"app": f"a{i % 50}", "pod": f"pod-{i}"},
                        "values": [[str(hour - 5 * D + i), f"old {i}"],
                                   [str(cutoff - 20 * MINUTE + i), f"before {i}"],
                                   [str(cutoff + 20 * MINUTE + i), f"after {i}"]]}
                       for i in range(first, min(first + 500, args.streams))]
            r = c.post("/logstore/api/v1/push", content=json.dumps({"streams": streams}),
                       headers={"Content-Type": "application/json"})
            assert r.status_code == 204, r.text
        assert c.post("/flush").status_code == 204
        clock = {"now": cutoff + 3 * D}
        ctx.retention.clock = lambda: clock["now"]
        rows = []
        for label, ahead in (("at the cutoff", 0), ("10 min later", 10 * MINUTE),
                             ("1 h later", H)):
            clock["now"] = cutoff + 3 * D + ahead
            commits = ctx.db.commits
            began = time.perf_counter()
            removed = c.blocking_portal.call(ctx.compactor.run_once)
            rows.append((label, removed, ctx.db.commits - commits,
                         time.perf_counter() - began))
    print(f"{args.streams:,} streams")
    print("| sweep | lines removed | commits | time |")
    print("|---|---:|---:|---:|")
    for label, removed, commits, took in rows:
        print(f"| {label} | {removed:,} | {commits:,} | {took:.2f} s |")


if __name__ == "__main__":
    main()
