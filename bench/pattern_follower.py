"""A follower's look at the pattern templates (issue 22): in a cluster, a node that does not
hold the pattern-miner lease learns the templates another node mined, once a minute
(services/patterns/patterns.py), since it matches the lines a delete request hides against
them. N streams with T templates each are stored, a follower starts (loading them all), then
a minute of mining changes some (templates widened, new ones, a new stream's) and the
10-minute expiry drops some; the follower's next look is timed, and one more with nothing
changed.

    .venv/bin/python bench/pattern_follower.py [--streams 20000] [--templates 5]
        [--store sqlite|postgres] [--changed 1000]

In-process: the follower's `Patterns` service over the SQLite file, or over a PostgreSQL
started here (tests/postgres.py, as the tests start it), where a cluster keeps its
templates. Prints a table and writes nothing to bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

H = 3600
NOW_S = 1_790_000_000  # the newest bucket's second
BATCH = 10_000


class AnotherNodeMines:
    """The leases of a follower: another node holds the pattern-miner lease."""
    node = "follower"

    async def holds(self, name: str) -> bool:
        return False


def _row(sid: int, cid: int, variant: str = "") -> tuple:
    words = ["<*>", f"app-{sid % 50}", "GET", "/api/v1/items", f"handler{cid}", "took",
             "<*>", "status", "<*>", variant or "ok"]
    line = " ".join(w if w != "<*>" else "12.5ms" for w in words)
    spans, pos = [], 0
    for w in line.split(" "):
        spans.append([pos, pos + len(w)])
        pos += len(w) + 1
    pattern = " ".join("<_>" if w == "<*>" else w for w in words)
    return sid, cid, words, line, spans, [], "info", pattern


def _fill(state, streams: int, templates: int, dropped: int) -> None:
    """Every stream's templates, each with one count in the newest bucket; the first
    `dropped` templates with theirs 4 hours older, for the expiry to drop."""
    from storage import patterns as store

    keys = [(sid, cid) for sid in range(1, streams + 1) for cid in range(1, templates + 1)]
    for at in range(0, len(keys), BATCH):
        part = keys[at:at + BATCH]
        rows = [_row(sid, cid) for sid, cid in part]
        counts = {(sid, cid, NOW_S - (4 * H if at + i < dropped else 0)): 1
                  for i, (sid, cid) in enumerate(part)}
        state.write_sync(lambda conn: store.save(conn, rows, counts, 1))


def _a_minute_of_mining(state, streams: int, templates: int, changed: int) -> int:
    """What the miner writes in a minute: `changed` templates widened, half as many new
    ones in existing streams and 10 new streams' (one batch), then the expiry; the
    templates it dropped."""
    from storage import patterns as store

    rows = [_row(1 + i * 7 % streams, 1 + i % templates, "<*>") for i in range(changed)]
    rows += [_row(1 + i * 13 % streams, templates + 1 + i // streams, "new")
             for i in range(changed // 2)]
    rows += [_row(streams + 1 + i, 1) for i in range(10)]
    counts = {(sid, cid, NOW_S): 1 for sid, cid, *_ in rows}
    state.write_sync(lambda conn: store.save(conn, rows, counts, 2))
    return len(state.write_sync(lambda conn: store.forget_older(conn, 3 * H)))


async def _follower(state):
    from services.patterns import patterns as service
    from services.patterns.mining import LocalMiners

    follower = service.Patterns(state, True, 3 * H * 10**9, LocalMiners(state),
                                leases=AnotherNodeMines())
    began = time.perf_counter()
    await follower.start()  # loads every template, once
    await follower.stop()   # the test's looks, not the background loop's
    return follower, time.perf_counter() - began


async def _look(follower) -> tuple[float, int]:
    from services.patterns import patterns as service

    service.TEMPLATES_REFRESH_SECONDS = 0.0  # the minute has passed
    began = time.perf_counter()
    await follower.mine_now()
    return time.perf_counter() - began, follower.miners.templates


def _open(kind: str):
    if kind == "sqlite":
        from storage.db import Database

        state = Database(str(Path(tempfile.mkdtemp(prefix="logstore-follower-")) / "d"))
        state.open()
        return state, None
    from storage.shared.postgres import PostgresState
    from tests import postgres

    server = postgres.start_server()
    state = PostgresState(server.fresh_database())
    state.open()
    return state, server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=20000)
    ap.add_argument("--templates", type=int, default=5)
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--changed", type=int, default=1000)
    args = ap.parse_args()
    state, server = _open(args.store)
    try:
        _fill(state, args.streams, args.templates, dropped=args.changed)
        follower, start_s = asyncio.run(_follower(state))
        dropped = _a_minute_of_mining(state, args.streams, args.templates, args.changed)
        looks = [asyncio.run(_look(follower)), asyncio.run(_look(follower))]
    finally:
        state.close()
        if server is not None:
            server.close()
    print(f"{args.streams:,} streams x {args.templates} templates on {args.store}; "
          f"{args.changed:,} widened, {args.changed // 2 + 10:,} new, {dropped:,} dropped")
    print("| | time | templates held |")
    print("|---|---:|---:|")
    print(f"| start (load all) | {start_s:.2f} s | |")
    for label, (took, held) in zip(("look after the minute's mining", "look, nothing new"),
                                   looks):
        print(f"| {label} | {took * 1000:,.1f} ms | {held:,} |")


if __name__ == "__main__":
    main()
