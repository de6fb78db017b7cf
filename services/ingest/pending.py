"""Pushes answered once in the push log (storage/push_log.py), stored in the SQLite file a
batch at a time.

Under load (more than one push in the server), a push whose streams are plain columns and
pass every check is answered once its record (services/ingest/records.py) is synced in the
push log. One task here stores the records that wait, all of them at once: a query worker
merges each stream's lines of every push in the batch and packs them (`prepare_records`),
and one transaction appends them and raises `push_log.applied`. A
stream's pack, its index leaves and rollups are then written once per batch instead of once
per push: the preparation and the writer each cost about half as much per line
(bench/REPORT.md, issue 25).

A reader must not miss a line that was answered: `settled()` waits (at the HTTP edge,
app.py) until every record written before it is stored. A start stores again the records
after `push_log.applied` before anything else runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable

from config import LimitsConfig
from services.ingest.prepare import Preparer
from services.ingest.records import prepare_records
from services.runtime.metrics import ScrapeCollector, counter, gauge
from storage.entries import DEFAULT_WINDOW_NS, AppendResult, PreparedStream, append
from storage.push_log import Location, PushLog, read_payloads

log = logging.getLogger("logstore.pending")

# At most this many bytes of records wait to be stored: a push past it waits for room (the
# clients slow to the pace of the store, as they would have without the log).
MAX_PENDING_BYTES = 32 << 20
# A batch: at most this many bytes of records (a pack of a stream holds its lines of them)
MAX_BATCH_BYTES = 8 << 20
# A reader waits at most this long for the lines answered before it (a store that cannot
# write, e.g. a full disk, must not hang every query): it then reads what is stored.
SETTLE_WAIT_S = 10.0
RETRY_S = 1.0  # after a batch failed to be stored (it stays in the log and is tried again)


class _LimitsByTenant(dict):
    """Each tenant's limits, asked for when a record names the tenant (a start's records
    are not read twice to learn their tenants first)."""

    def __init__(self, limits_of: Callable[[str], LimitsConfig]) -> None:
        super().__init__()
        self.limits_of = limits_of

    def __missing__(self, tenant: str) -> LimitsConfig:
        self[tenant] = lim = self.limits_of(tenant)
        return lim


@dataclass
class _Record:
    seq: int
    tenant: str
    size: int
    location: Location | None = None  # once written: where the log holds it


class PendingPushes:
    """The records written and not yet stored, and the one task that stores them."""

    def __init__(self, db: Any, push_log: PushLog, limits_of: Callable[[str], LimitsConfig],
                 store: Callable[[Any, str, list[PreparedStream]], AppendResult],
                 written: Callable[[str, AppendResult], None],
                 prepare_elsewhere: Callable[..., Any] | None = None,
                 window_ns: int = DEFAULT_WINDOW_NS) -> None:
        self.db = db
        self.log = push_log
        self.limits_of = limits_of
        self.store = store  # (conn, tenant, prepared) -> AppendResult, on the writer
        self.written = written  # told of each tenant's stored part, as a push's
        self.prepare_elsewhere = prepare_elsewhere  # a query worker's prepare_records
        self.window_ns = window_ns  # storage.block_window
        self.preparer = Preparer()
        self.accepting = False
        self.applied = 0  # every record up to it is stored
        self.newest_written = 0
        self.batches = 0
        self.waits = 0  # pushes that waited for room: the store did not keep up
        self.pending_bytes = 0
        self._records: list[_Record] = []  # in seq order
        self._taken = 0  # the first records of it, being stored
        self._wake: asyncio.Event | None = None
        self._room: list[asyncio.Future] = []
        self._settle: list[tuple[int, asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    # -- start and stop -----------------------------------------------------------------------
    def recover(self) -> int:
        """Before anything else runs: the records after `push_log.applied` stored (here, on
        this thread). Returns how many."""
        applied = self.db.write_sync(lambda conn: conn.execute(
            "SELECT applied FROM push_log WHERE id = 1").fetchone()[0])
        records = self.log.open(applied)
        batch: list[tuple[int, bytes]] = []
        size = 0
        for seq, payload in records:
            batch.append((seq, payload))
            size += len(payload)
            if size >= MAX_BATCH_BYTES:
                self._store_now(batch)
                batch, size = [], 0
        if batch:
            self._store_now(batch)
        self.applied = self.newest_written = max([applied, *(s for s, _ in records)])
        self.log.release(self.applied, everything=True)
        if records:
            log.info("stored %d pushes from the push log", len(records))
        return len(records)

    def _store_now(self, batch: list[tuple[int, bytes]]) -> None:
        prepared = prepare_records(self.preparer, [p for _, p in batch],
                                   _LimitsByTenant(self.limits_of), time.time_ns(),
                                   self.window_ns)
        results = self.db.write_sync(lambda conn: self._append(conn, prepared, batch[-1][0]))
        for tenant, result in results:
            self.written(tenant, result)

    async def start(self) -> None:
        self.recover()
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="push-log")
        self.accepting = True

    async def stop(self) -> None:
        """What waits is stored, unless the store cannot (it stays in the log)."""
        self.accepting = False
        try:
            await asyncio.wait_for(self.settled(wait=False), SETTLE_WAIT_S)
        except asyncio.TimeoutError:
            log.error("pushes not yet stored at stop: they stay in the push log")
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.log.close()

    # -- a push -------------------------------------------------------------------------------
    async def admit(self, tenant: str, payload: bytes) -> None:
        """Return once the record is durable; raise PushLogError when it cannot be."""
        if self.pending_bytes >= MAX_PENDING_BYTES:
            self.waits += 1
        while self.pending_bytes >= MAX_PENDING_BYTES:
            room = asyncio.get_running_loop().create_future()
            self._room.append(room)
            await room
        seq, done = self.log.submit(payload)
        record = _Record(seq, tenant, len(payload))
        self._records.append(record)
        self.pending_bytes += record.size
        del payload  # the log holds it: a query worker reads it back from there
        try:
            record.location = await done
        except BaseException:
            self._records.remove(record)
            self.pending_bytes -= record.size
            self._make_room()
            raise
        self.newest_written = max(self.newest_written, seq)
        assert self._wake is not None
        self._wake.set()

    async def settled(self, wait: bool = True) -> None:
        """Every record written when called is stored (or SETTLE_WAIT_S went by)."""
        target = self.newest_written
        if target <= self.applied:
            return
        future = asyncio.get_running_loop().create_future()
        self._settle.append((target, future))
        if not wait:
            await future
            return
        try:
            await asyncio.wait_for(asyncio.shield(future), SETTLE_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("read without waiting longer for pushes to be stored")

    # -- the store ----------------------------------------------------------------------------
    def _batch(self, full: bool = False) -> list[_Record]:
        """The next records to store after those taken already (written ones only, in seq
        order: a record still being synced holds back those after it). With `full`, none
        unless they make half a batch."""
        batch, size = [], 0
        for record in islice(self._records, self._taken, None):
            if record.location is None or (batch and size + record.size > MAX_BATCH_BYTES):
                break
            batch.append(record)
            size += record.size
        if full and size < MAX_BATCH_BYTES // 2:
            return []
        self._taken += len(batch)
        return batch

    async def _run(self) -> None:
        """A batch is prepared while the one before is appended, when enough waits to make
        it half full; else the next batch is what came meanwhile, so a batch grows with the
        load (prepared at once whatever its size, batches were a third as large, and each
        line cost more)."""
        assert self._wake is not None
        writing: asyncio.Task | None = None
        while True:
            self._wake.clear()
            batch = self._batch(full=writing is not None)
            if not batch:
                if writing is not None:
                    if not await self._finish(writing):
                        await asyncio.sleep(RETRY_S)
                    writing = None
                else:
                    await self._wake.wait()
                continue
            try:
                prepared = await self._prepare(batch)
            except Exception:  # noqa: BLE001 - kept, and tried again
                log.exception("pushes from the push log not stored yet")
                prepared = None
            if writing is not None and not await self._finish(writing):
                prepared = None
            writing = None
            if prepared is None:
                self._taken = 0  # all taken again, from the oldest
                await asyncio.sleep(RETRY_S)
                continue
            writing = asyncio.get_running_loop().create_task(self._write(batch, prepared))

    async def _finish(self, writing: asyncio.Task) -> bool:
        """The batch's append is done: its records leave the log. False when it failed
        (every record is taken again, from the oldest)."""
        try:
            self._stored(*await writing)
        except Exception:  # noqa: BLE001 - kept, and tried again
            log.exception("pushes from the push log not stored yet")
            self._taken = 0
            return False
        return True

    async def _prepare(self, batch: list[_Record]) -> list[tuple[str, list[PreparedStream]]]:
        """The batch prepared in a query worker, which reads the records from the log
        itself (8 MB through the server's pickle and a pipe cost the batch a third of its
        time); here, in a thread, when no worker is free."""
        locations = [r.location for r in batch]
        limits = {t: self.limits_of(t) for t in {r.tenant for r in batch}}
        now = time.time_ns()
        prepared = None
        if self.prepare_elsewhere is not None:
            prepared = await self.prepare_elsewhere(locations, limits, now, self.window_ns)
        if prepared is None:
            prepared = await asyncio.to_thread(lambda: prepare_records(
                self.preparer, read_payloads(locations), limits, now, self.window_ns))
        return prepared

    async def _write(self, batch: list[_Record], prepared: list
                     ) -> tuple[list[_Record], list[tuple[str, AppendResult]]]:
        last = batch[-1].seq
        return batch, await self.db.write(lambda conn: self._append(conn, prepared, last),
                                          rerun=True)

    def _stored(self, batch: list[_Record], results: list[tuple[str, AppendResult]]
                ) -> None:
        """The batch is in the database: its records leave the log."""
        del self._records[:len(batch)]
        self._taken -= len(batch)
        self.pending_bytes -= sum(r.size for r in batch)
        self.batches += 1
        self.applied = batch[-1].seq
        self.log.release(self.applied, everything=not self._records)
        self._make_room()
        self._settle_waiters()
        for tenant, result in results:
            self.written(tenant, result)

    def _append(self, conn: Any, prepared: list[tuple[str, list[PreparedStream]]],
                last: int) -> list[tuple[str, AppendResult]]:
        out = [(tenant, self.store(conn, tenant, streams)) for tenant, streams in prepared]
        conn.execute("UPDATE push_log SET applied = ? WHERE id = 1", (last,))
        return out

    def _make_room(self) -> None:
        while self._room and self.pending_bytes < MAX_PENDING_BYTES:
            room = self._room.pop(0)
            if not room.done():
                room.set_result(None)

    def _settle_waiters(self) -> None:
        keep = []
        for target, future in self._settle:
            if target <= self.applied:
                if not future.done():
                    future.set_result(None)
            else:
                keep.append((target, future))
        self._settle = keep


def append_for(db: Any, window_ns: int) -> Callable[[Any, str, list[PreparedStream]],
                                                      AppendResult]:
    """The writer's append of one tenant's prepared streams, as a push's."""
    return lambda conn, tenant, streams: append(conn, db.stream_ids, tenant, streams,
                                                window_ns)


def collector(pending: PendingPushes) -> ScrapeCollector:
    return ScrapeCollector(
        counter("logstore_push_log_pushes", "Pushes answered once in the push log (under "
                "load), stored later in batches.", lambda: pending.log.records),
        counter("logstore_push_log_batches", "Batches of the push log's pushes stored.",
                lambda: pending.batches),
        counter("logstore_push_log_waits", "Pushes that waited for room in the push log "
                "(32 MiB of answered pushes were waiting to be stored).",
                lambda: pending.waits),
        gauge("logstore_push_log_pending_bytes", "Bytes of pushes answered and not yet "
              "stored.", lambda: pending.pending_bytes))
