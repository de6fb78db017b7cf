"""The pattern service (spec/http-api.md section 7): mines templates from pushed lines off
the push path and answers the patterns API.

Like the sealer it runs beside the writer, never in it: after pushes (and every few
seconds) it has head entries above its high-water mark run through each stream's miner
(services/patterns/miner.py), in a query worker process or, without those, on a reader
thread (services/patterns/mining.py), then writes the changed templates, the per-10-second
counts and the new mark in one short writer job. A restart
loads the templates back and goes on from the mark. The sealer waits for it: before each
round it has the miner catch up and seals nothing above its mark, so no line leaves the head
unmined. Counts older than `pattern_ingester.retain_for` (3h, Loki's default) before the
newest are dropped with the templates they leave empty.

The API sums the counts of every matching stream per pattern text, in `step` buckets.

Of nodes sharing the state, only the holder of the "pattern-miner" lease mines (and drops
old counts); a node that takes it over first reads the templates and the mark the last
miner left. The others answer the API from the same shared tables and, once a minute, learn
the templates (which match the lines a delete request hides) that the miner wrote or dropped
since their last look."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from services.runtime.base import cancel_task
from services.runtime.metrics import ScrapeCollector, counter, gauge
from services.patterns.mining import BUCKET_S, LocalMiners, WorkerMiners
from storage import patterns as store
from storage.entries import newest_head_id
from storage.shared import Leases

log = logging.getLogger("logstore.patterns")
IDLE_SECONDS = 5.0
FORGET_EVERY_SECONDS = 600.0
PAUSE_FACTOR = 3.0
LEASE = "pattern-miner"
TEMPLATES_REFRESH_SECONDS = 60.0


class Patterns:
    def __init__(self, db: Any, enabled: bool, retain_for_ns: int,
                 miners: LocalMiners | WorkerMiners | None = None,
                 newest: Callable[[Any], int] = newest_head_id, *, leases: Leases):
        self.db = db
        self.leases = leases
        # this node mines: it holds the lease and has read what the last miner left
        self._mining = False
        # when it last read the stored templates (a node that does not mine looks again)
        self._loaded_at = 0.0
        # the mark of the newest line there is to mine (read on a reader thread): the
        # head's newest id, or ClickHouse's newest seq
        self.newest = newest
        self.enabled = enabled
        self.retain_for = retain_for_ns
        # where the templates live and the mining runs (services/patterns/mining.py)
        self.miners = miners if miners is not None else LocalMiners(db)
        self.mined_id = 0
        self.lines_mined = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self._forgot_at = 0.0

    # -- lifetime ---------------------------------------------------------------------------------
    def notify(self, *_args: Any) -> None:
        self._wake.set()

    async def start(self) -> None:
        if not self.enabled:
            return
        await self._load()
        self._mining = await self.leases.holds(LEASE)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="patterns")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_task(task)

    async def _load(self) -> None:
        self._loaded_at = time.monotonic()
        await self.miners.load()
        self.mined_id = await self.db.read(store.mined_id)

    async def _mines(self) -> bool:
        held = await self.leases.holds(LEASE)
        if held and not self._mining:
            await self._load()
        elif not held and time.monotonic() - self._loaded_at > TEMPLATES_REFRESH_SECONDS:
            # what the miner wrote and dropped since the last look: reading every template
            # again took 13 s with 500,000 of them (issue 22)
            self._loaded_at = time.monotonic()
            await self.miners.refresh()
        self._mining = held
        return held

    async def _run(self) -> None:
        while True:
            try:
                # not asyncio.wait_for: in Python 3.11 it can swallow a cancel that arrives as
                # the event fires, and stop() then waits forever (a test's shutdown hung so)
                async with asyncio.timeout(IDLE_SECONDS):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                while await self.mine_now():
                    pass
                if self._mining and time.monotonic() - self._forgot_at > FORGET_EVERY_SECONDS:
                    await self.forget_old()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep the service; the mark did not move
                log.exception("mining patterns failed")

    # -- mining -----------------------------------------------------------------------------------
    async def mine_now(self) -> int:
        """Mine one batch of new head entries; returns how many (0: caught up)."""
        async with self._lock:
            if not await self._mines():
                return 0
            began = time.perf_counter()
            done = await self.miners.mine(self.mined_id)
            if done is None:
                return 0
            count, changed, counts, last, _ = done
            await self.db.write(lambda conn: store.save(conn, changed, counts, last))
            self.mined_id = last
            self.lines_mined += count
            # mining is CPU work (on the server's interpreter without query workers): leave
            # pushes and queries three times as much
            await asyncio.sleep((time.perf_counter() - began) * PAUSE_FACTOR)
            return count

    async def forget_lines(self, sid: int, rows: list[tuple[int, str]]) -> None:
        """Lines the compactor removed from disk leave the counts too."""
        patterns = await self.miners.match(sid, [line for _, line in rows])
        counts: dict[tuple[int, str, int], int] = {}
        for (ts, _), pattern in zip(rows, patterns):
            if pattern is not None:
                key = (sid, pattern, ts // 10**9 // BUCKET_S * BUCKET_S)
                counts[key] = counts.get(key, 0) + 1
        if counts:
            await self.db.write(lambda conn: store.uncount(conn, counts))

    async def catch_up(self) -> int:
        """Mine every head entry there is now; the highest entry id mined (the sealer seals
        nothing above it, so no line leaves the head unmined). Entries pushed meanwhile wait
        for the next round: chasing them would keep a sealer waiting for as long as pushes
        keep coming, and the head would never be sealed."""
        newest = await self.db.read(self.newest)
        while self.mined_id < newest and await self.mine_now():
            pass
        return self.mined_id

    async def forget_old(self) -> None:
        self._forgot_at = time.monotonic()
        keep = self.retain_for // 10**9
        async with self._lock:
            dropped = await self.db.write(lambda conn: store.forget_older(conn, keep))
            if dropped:
                # only the dropped templates: loading them all again took seconds with
                # hundreds of thousands of them (issue 22)
                await self.miners.forget(dropped)

    # -- the API ----------------------------------------------------------------------------------
    async def query(self, stream_ids: list[int], start: int, end: int, step: int,
                    hidden: list[tuple[int, int, str]] = ()) -> list[dict[str, Any]]:
        """Patterns of these streams in [start, end] with counts per `step` bucket, without
        the `hidden` lines (stream, ts, line) that pending delete requests name."""
        step_s = max(BUCKET_S, step // 10**9)
        first = start // 10**9 // BUCKET_S * BUCKET_S  # the bucket `start` falls in
        rows = await self.db.read(store.samples, stream_ids, first, end // 10**9, step_s)
        per: dict[str, dict[int, int]] = {}
        levels: dict[str, str] = {}
        for pattern, level, at, count in rows:
            per.setdefault(pattern, {})[at] = count
            levels.setdefault(pattern, level)
        by_stream: dict[int, list[tuple[int, str]]] = {}
        for sid, ts, line in hidden:
            by_stream.setdefault(sid, []).append((ts, line))
        for sid, lines in by_stream.items():
            patterns = await self.miners.match(sid, [line for _, line in lines])
            for (ts, _), pattern in zip(lines, patterns):
                series = per.get(pattern) if pattern is not None else None
                at = ts // 10**9 // BUCKET_S * BUCKET_S // step_s * step_s
                if series and series.get(at, 0) > 0:
                    series[at] -= 1
        per = {p: {t: n for t, n in series.items() if n > 0} for p, series in per.items()}
        per = {p: series for p, series in per.items() if series}
        ranked = sorted(per.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
        return [{"pattern": p, "level": levels[p],
                 "samples": [[t, n] for t, n in sorted(series.items())]}
                for p, series in ranked]


def collector(patterns: Patterns) -> ScrapeCollector:
    return ScrapeCollector(
        counter("logstore_patterns_lines_mined", "Lines the pattern miner has read.",
                lambda: patterns.lines_mined),
        gauge("logstore_patterns_templates", "Templates the miner holds, over every stream.",
              lambda: patterns.miners.templates))
