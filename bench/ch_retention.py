"""One retention sweep on ClickHouse (the embedded engine, chdb): N streams of one tenant
under a 2-day `retention_stream` rule (the tenant keeps 30 days), each with three lines two
hours old and two a minute old (a tenth of them with only the old lines), then the
compactor's sweep with its clock 47 hours ahead (the old lines have expired for it, not yet
for ClickHouse's TTL), timed, and the DELETE statements it sent counted as the mutations
ClickHouse recorded.

    .venv/bin/python bench/ch_retention.py [--streams 500] [--one-period]

The lines are stored under the rule, whose TTL covers them (storage/clickhouse/ttl.py): the
sweep sends no DELETE of lines. With --one-period every stream is under the tenant's one
period of 2 days instead, which the tenant's TTL covers.

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
H = 3600 * NS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=500)
    ap.add_argument("--one-period", action="store_true",
                    help="retention_period 2d and no rule: every stream under one period, "
                         "which the tables' TTL covers (lines 2 h and 1 min old, the "
                         "compactor's clock 2 d - 1 h ahead)")
    args = ap.parse_args()
    from litestar.testing import TestClient

    import config as config_module
    from app import create_app

    work = Path(tempfile.mkdtemp(prefix="logstore-chret-"))
    cfg = {"common": {"path_prefix": str(work / "data")},
           "server": {"log_level": "warn"},
           "storage": {"backend": "clickhouse",
                       "clickhouse": {"url": f"chdb://{work / 'ch'}"}},
           "limits_config": {"reject_old_samples": False, "retention_period": "2d"}
           if args.one_period else
           {"reject_old_samples": False, "retention_period": "30d",
            "retention_stream": [{"selector": '{app="short"}', "priority": 1,
                                  "period": "2d"}]},
           "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"}}
    now = time.time_ns()
    with TestClient(create_app(config_module.config_from_dict(cfg))) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.stop)
        for first in range(0, args.streams, 500):
            streams = []
            for i in range(first, min(first + 500, args.streams)):
                old, recent = now - 2 * H, now - 60 * NS
                stamps = [old + k * NS for k in range(3)]
                if i % 10:
                    stamps += [recent + k * NS for k in range(2)]
                streams.append({"stream": {"app": "short", "pod": f"p{i}"},
                                "values": [[str(ts), f"p{i} {ts}"] for ts in stamps]})
            r = c.post("/logstore/api/v1/push", content=json.dumps({"streams": streams}),
                       headers={"Content-Type": "application/json"})
            assert r.status_code == 204, r.text
        store = ctx.querier.store

        def mutations() -> int:  # a lightweight DELETE is one (not a TTL put on the parts)
            return store.client.query("SELECT count() FROM system.mutations "
                                      "WHERE database = {d:String} AND command NOT LIKE "
                                      "'%MATERIALIZE TTL%'", {"d": store.db})[0][0]

        # the old lines expire for the compactor, not for ClickHouse
        ctx.compactor.policy.clock = lambda: now + 48 * H - H
        before = mutations()
        began = time.perf_counter()
        removed = c.blocking_portal.call(ctx.compactor.run_once)
        took = time.perf_counter() - began
        deletes = mutations() - before
        entries = store.client.query("SELECT count() FROM system.mutations WHERE database = "
                                     "{d:String} AND table = 'entries' AND command NOT LIKE "
                                     "'%MATERIALIZE TTL%'", {"d": store.db})[0][0]
    print("| streams | lines removed | DELETE statements (mutations) | of entries | sweep |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {args.streams:,} | {removed:,} | {deletes:,} | {entries:,} | {took:.2f} s |")


if __name__ == "__main__":
    main()
