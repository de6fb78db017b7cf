"""Retention sweeps over many streams (issue 22): N pods of one tenant under a 3-day
retention period, each with a line 5 days old and two sealed into one block that straddles
the cutoff (kept whole until the cutoff passes its end), then three sweeps with the
compactor's clock at the cutoff, 10 minutes later and an hour later: the first removes the
old lines, the second has nothing to remove, the third removes the straddling blocks. Each
sweep timed, with the writer's commits it made.

With --clickhouse, on ClickHouse's embedded engine (chdb): the tenant keeps 30 days and a
`retention_stream` rule 3 days for every pod, each with a line 2 h before the cutoff, one
20 minutes before and one 20 minutes after, and a hundredth of them one more 15 minutes
after; five sweeps: 3 hours before the cutoff (nothing has expired), at it (the two older
lines of each pod), 10 minutes later (nothing), 16 minutes later (the hundredth's line)
and an hour later (the last lines: every pod dropped). The lines are stored under no rule
(as copied from SQLite), so DELETEs remove them; with --ttl under the rule, whose TTL
removes them (storage/clickhouse/ttl.py), and the sweep only moves the streams' ranges and
drops the emptied ones. Each sweep timed, with the queries, the other statements (each
DELETE a mutation; the first sweep's ALTERs put the TTL on) and the rows inserted it sent
to ClickHouse.

    .venv/bin/python bench/retention_sweep.py [--streams 20000] [--clickhouse [--ttl]]

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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NS = 10**9
MINUTE = 60 * NS
H = 3600 * NS
D = 24 * H


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=20000)
    ap.add_argument("--clickhouse", action="store_true",
                    help="storage.backend: clickhouse on the embedded engine (chdb)")
    ap.add_argument("--ttl", action="store_true",
                    help="with --clickhouse: the lines stored under the rule, left to its TTL")
    args = ap.parse_args()
    if args.clickhouse:
        clickhouse(args.streams, args.ttl)
    else:
        sqlite(args.streams)


def push(c: Any, streams: list[dict]) -> None:
    for first in range(0, len(streams), 500):
        r = c.post("/logstore/api/v1/push",
                   content=json.dumps({"streams": streams[first:first + 500]}),
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 204, r.text


def sqlite(n: int) -> None:
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
        push(c, [{"stream": {"app": f"a{i % 50}", "pod": f"pod-{i}"},
                  "values": [[str(hour - 5 * D + i), f"old {i}"],
                             [str(cutoff - 20 * MINUTE + i), f"before {i}"],
                             [str(cutoff + 20 * MINUTE + i), f"after {i}"]]}
                 for i in range(n)])
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
    print(f"{n:,} streams")
    print("| sweep | lines removed | commits | time |")
    print("|---|---:|---:|---:|")
    for label, removed, commits, took in rows:
        print(f"| {label} | {removed:,} | {commits:,} | {took:.2f} s |")


class Counted:
    """What a sweep sends to ClickHouse: queries, other statements (DELETEs, ALTERs) and
    rows inserted by table, through the store's one client."""

    def __init__(self, client: Any):
        self.queries = self.statements = 0
        self.inserted: dict[str, int] = {}
        query, command, insert = client.query, client.command, client.insert

        def counted_query(sql: str, *a: Any, **k: Any) -> Any:
            self.queries += 1
            return query(sql, *a, **k)

        def counted_command(sql: str, *a: Any, **k: Any) -> Any:
            self.statements += 1
            return command(sql, *a, **k)

        def counted_insert(table: str, columns: Any, rows: Any) -> Any:
            rows = list(rows)
            name = table.rsplit(".", 1)[-1]
            self.inserted[name] = self.inserted.get(name, 0) + len(rows)
            return insert(table, columns, rows)

        client.query, client.command, client.insert = (counted_query, counted_command,
                                                       counted_insert)


def clickhouse(n: int, by_ttl: bool) -> None:
    from litestar.testing import TestClient

    import config as config_module
    from app import create_app

    work = Path(tempfile.mkdtemp(prefix="logstore-chsweep-"))
    cfg = {"common": {"path_prefix": str(work / "data")},
           "server": {"log_level": "warn"},
           "storage": {"backend": "clickhouse",
                       "clickhouse": {"url": f"chdb://{work / 'ch'}"}},
           "limits_config": {"reject_old_samples": False, "retention_period": "30d",
                             "retention_stream": [{"selector": '{app=~"a.+"}',
                                                   "priority": 1, "period": "3d"}]},
           "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"}}
    # the lines are hours old for ClickHouse (its clock, the TTL's, is the real one); the
    # compactor's clock runs 3 days ahead of them
    now = time.time_ns()
    cutoff = now - now % MINUTE - H
    with TestClient(create_app(config_module.config_from_dict(cfg))) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.stop)
        store = ctx.querier.store
        if not by_ttl:
            store.rule_of = None  # lines under no rule: the rule's TTL does not cover them
        push(c, [{"stream": {"app": f"a{i % 50}", "pod": f"pod-{i}"},
                  "values": [[str(cutoff - 2 * H + i), f"old {i}"],
                             [str(cutoff - 20 * MINUTE + i), f"before {i}"],
                             *([[str(cutoff + 15 * MINUTE + i), f"soon {i}"]]
                               if i % 100 == 0 else []),
                             [str(cutoff + 20 * MINUTE + i), f"after {i}"]]}
                 for i in range(n)])
        clock = {"now": cutoff + 3 * D}
        ctx.compactor.policy.clock = lambda: clock["now"]
        rows = []
        for label, ahead in (("3 h before the cutoff", -3 * H), ("at the cutoff", 0),
                             ("10 min later", 10 * MINUTE), ("16 min later", 16 * MINUTE),
                             ("1 h later", H)):
            clock["now"] = cutoff + 3 * D + ahead
            counted = Counted(store.client)
            dropped = ctx.compactor.streams_removed
            began = time.perf_counter()
            removed = c.blocking_portal.call(ctx.compactor.run_once)
            took = time.perf_counter() - began
            del store.client.query, store.client.command, store.client.insert
            rows.append((label, removed, ctx.compactor.streams_removed - dropped, counted,
                         took))
    mode = "lines left to the rule's TTL" if by_ttl else "lines deleted by DELETEs"
    print(f"{n:,} streams, ClickHouse, {mode}")
    print("| sweep | lines removed | streams dropped | queries | DELETEs and ALTERs "
          "| rows inserted | time |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for label, removed, dropped, counted, took in rows:
        inserted = ", ".join(f"{t} {k:,}" for t, k in sorted(counted.inserted.items()))
        print(f"| {label} | {removed:,} | {dropped:,} | {counted.queries:,} | "
              f"{counted.statements:,} | {inserted or '0'} | {took:.2f} s |")


if __name__ == "__main__":
    main()
