"""Retention: which lines have expired, hidden from reads at once and removed by the compactor.

With `compactor.retention_enabled`, a stream keeps `limits_config.retention_period` (0:
forever) unless a `limits_config.retention_stream` rule matches its labels: then the rule
with the highest priority decides, among equals the one with the longest selector, then the
shorter period. `RetentionPolicy.cutoff_of(labels)` (services/upkeep/retention_policy.py)
is the oldest timestamp still visible; the query service hands it to
services.read.visibility.VisibleReader, which drops older lines from every read, log and
metric (rollup counts included), whatever the storage behind it.

The compactor wakes every `compactor.compaction_interval` and removes from disk what expired
more than `compactor.retention_delete_delay` ago (storage/retention.py), in writer jobs of
a few thousand rows so pushes keep flowing, then gives the space back. Each job is one
transaction, and the sweep is idempotent: a kill in the middle leaves a consistent database
and the next sweep finishes the work. Of nodes sharing the state, only the holder of the
"compactor" lease sweeps (storage/shared/leases.py). On ClickHouse the sweep first keeps the
tables' TTL in step with the limits (storage/clickhouse/ttl.py) and sends no DELETE for the
lines that TTL removes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from services.runtime.base import cancel_task
from services.runtime.metrics import ScrapeCollector, counter, gauge
from storage import retention
from storage.shared import Leases
from services.upkeep.retention_policy import RetentionPolicy
from storage.blocks import sealing

log = logging.getLogger("logstore.compactor")
LEASE = "compactor"


class Compactor:
    def __init__(self, db: Any, policy: RetentionPolicy, *, interval_ns: int, delay_ns: int,
                 leases: Leases, deletions: Any = None, removal: Any = None):
        self.db = db
        self.leases = leases
        # storage.backend: clickhouse: where lines are removed instead of SQLite's head and
        # blocks (storage/clickhouse/removal.py)
        self.removal = removal
        self.policy = policy
        self.deletions = deletions
        self.interval = interval_ns / 1e9
        self.delay = delay_ns
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self.sweeps = 0
        self.lines_removed = 0
        self.blocks_removed = 0
        self.streams_removed = 0
        self.ttl_changes = 0  # on ClickHouse: times the tables' TTL was set or taken away
        self.last_duration = 0.0

    async def start(self) -> None:
        # on ClickHouse also with retention off: a TTL left from when it was on must go
        if self.policy.enabled or self.removal is not None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="compactor")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_task(task)

    async def _run(self) -> None:
        while True:
            try:
                if await self.leases.holds(LEASE):
                    await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the service; try next interval
                log.warning("retention sweep failed: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(self.interval)

    async def run_once(self) -> int:
        """One retention sweep; returns the lines removed."""
        if self.removal is not None:
            return await self._run_once_elsewhere()
        async with self._lock:
            started = time.perf_counter()
            removed = 0
            streams = await self.db.read(retention.stream_labels)
            ids = self.db.stream_ids
            emptied: set[int] = set()
            if self.deletions is not None:
                removed += await self.deletions.process_due(streams)
                emptied, self.deletions.touched = self.deletions.touched, set()
            touched = sorted(emptied)
            for at in range(0, len(touched), retention.EXPIRE_STREAMS):
                self.streams_removed += await self.db.write(
                    lambda conn, part=touched[at:at + retention.EXPIRE_STREAMS]: sum(
                        retention.drop_if_empty(conn, sid, ids) for sid in part))
            due = []  # (stream id, cutoff, oldest on disk)
            for sid, info in streams.items():
                visible = self.policy.cutoff_of(info.tenant, info.labels)
                if visible is not None and info.first_ts < visible - self.delay:
                    due.append((sid, visible - self.delay, info.first_ts))
            for at in range(0, len(due), retention.SWEEP_STREAMS):
                part = due[at:at + retention.SWEEP_STREAMS]
                cuts = await self.db.read(retention.disk_cutoffs, [d[:2] for d in part])
                # a block straddling the cutoff is kept whole: until the cutoff passes its
                # end, the stream has nothing older than the cut on disk to remove
                todo = [(sid, cuts[sid]) for sid, _, oldest in part if cuts[sid] > oldest]
                while todo:
                    done = await self.db.write(
                        lambda conn, t=todo: retention.expire_streams(conn, t, ids))
                    removed += done.lines
                    self.blocks_removed += done.blocks
                    self.streams_removed += done.streams
                    todo = done.left
            before = None
            while True:  # hand every freed page back, a few thousand per writer job
                left = await self.db.write(
                    lambda conn: sealing.reclaim_space(conn, min_free_pages=1))
                if left == 0 or left == before:
                    break
                before = left
            self.sweeps += 1
            self.lines_removed += removed
            self.last_duration = time.perf_counter() - started
            if removed:
                log.info("retention sweep removed %d lines in %.1f s", removed,
                         self.last_duration)
            return removed

    async def _run_once_elsewhere(self) -> int:
        """The sweep over ClickHouse: the same requests and cutoffs, removed there (no
        rollups or blocks to keep whole: the cutoff is exact). The tables' TTL first follows
        the limits in force; the streams it covers keep their lines for it to remove, the
        others' are deleted. Streams that share a tenant and a cutoff (one clock reading
        for the sweep) are handled together."""
        async with self._lock:
            started = time.perf_counter()
            removal = self.removal
            if not self.policy.enabled:
                if await asyncio.to_thread(removal.set_ttl, self.policy.ttl_plan(self.delay)):
                    self.ttl_changes += 1
                return 0
            streams = await asyncio.to_thread(removal.streams)
            plan = self.policy.ttl_plan(self.delay, streams)
            if await asyncio.to_thread(removal.set_ttl, plan):
                self.ttl_changes += 1
            removed = 0
            emptied: set[int] = set()
            if self.deletions is not None:
                removed += await self.deletions.process_due(streams, removal)
                emptied, self.deletions.touched = self.deletions.touched, set()
            now = self.policy.clock()
            expiring: dict[tuple[str, int, bool], list[int]] = {}
            for sid, info in streams.items():
                visible = self.policy.cutoff_of(info.tenant, info.labels, now)
                if visible is None or info.first_ts >= visible - self.delay:
                    continue
                # the TTL removes the stream's lines when a rule of it covers every line:
                # its tenant's, or the rule each line was stored under, after this period
                keep = now - visible + self.delay
                by_ttl = plan.period_of(info.tenant) == keep or all(
                    plan.rules_by_number.get(number) == keep for number in info.rules)
                expiring.setdefault((info.tenant, visible - self.delay, by_ttl),
                                    []).append(sid)
            # (tenant, the oldest line a stream must still hold to stay) -> streams
            to_drop: dict[tuple[str, int | None], list[int]] = {}
            for sid in sorted(emptied):
                to_drop.setdefault((streams[sid].tenant, None), []).append(sid)
            for (tenant, cut, by_ttl), sids in expiring.items():
                lines, left_empty = await asyncio.to_thread(removal.expire, tenant, sids, cut,
                                                            not by_ttl)
                removed += lines
                to_drop.setdefault((tenant, cut), []).extend(
                    sid for sid in left_empty if sid not in emptied)
            for (tenant, since), sids in to_drop.items():
                dropped = await asyncio.to_thread(removal.drop_empty, tenant, sids, since)
                self.streams_removed += len(dropped)
            self.sweeps += 1
            self.lines_removed += removed
            self.last_duration = time.perf_counter() - started
            return removed


def collector(c: Compactor) -> ScrapeCollector:
    def of_deletions(read: Callable[[Any], Any]) -> Callable[[], Any]:
        return lambda: None if c.deletions is None else read(c.deletions)  # no deletion API

    return ScrapeCollector(
        counter("logstore_compactor_retention_sweeps", "Retention sweeps the compactor ran.",
                lambda: c.sweeps),
        counter("logstore_compactor_retention_lines_removed",
                "Lines the retention sweeps removed from disk.", lambda: c.lines_removed),
        counter("logstore_compactor_streams_removed",
                "Streams removed because no line was left.", lambda: c.streams_removed),
        counter("logstore_compactor_delete_pieces_processed",
                "Delete request pieces removed from disk.",
                of_deletions(lambda d: d.pieces_processed)),
        counter("logstore_compactor_deleted_lines", "Lines delete requests removed from disk.",
                of_deletions(lambda d: d.lines_deleted)),
        counter("logstore_compactor_deleted_bytes",
                "Bytes of log lines delete requests removed from disk.",
                of_deletions(lambda d: d.bytes_deleted)),
        gauge("logstore_compactor_delete_requests", "Delete requests by status.",
              of_deletions(lambda d: [([s], n) for s, n in sorted(d.status_counts.items())]),
              labels=["status"]),
        gauge("logstore_compactor_last_sweep_seconds", "How long the last compactor sweep took.",
              lambda: c.last_duration))
