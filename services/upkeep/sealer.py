"""The sealer service: merges the head into compressed, summarised blocks in the background.

A push stays one cheap insert: a pack per stream of many lines, a row per line for a
stream's few (storage/entries.py). This loop wakes when pushes commit (and every `interval`
seconds in any case), asks the head which (stream, window) groups are due (see
storage.blocks.sealing.scan_head) and seals each: it reads and encodes the group's packs and
`entries` rows on a reader thread, outside any transaction, then hands the writer one short
job that inserts the block and deletes those packs and rows (small groups, the few lines of
quiet streams, go many to a job: one commit for them all, each block's move in its own
savepoint). That job is the only thing sealing puts on the writer, so pushes never wait
behind a compression; while pushes keep arriving the loop pauses between jobs for as long as
the job's reading and encoding took, so sealing takes at most about half of a busy machine.

Crash safety comes from the writer job being atomic: at every commit each acknowledged line
is in the head or in one block, never both. A restart simply finds the due groups again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from services.runtime import memory
from services.runtime.base import cancel_task
from services.runtime.metrics import ScrapeCollector, counter
from storage.blocks import sealing
from storage.streams import select_stream_ids

log = logging.getLogger("logstore.sealer")

INTERVAL_SECONDS = 10.0
# under push load: pause PAUSE_FACTOR x the block's duration after each block
PAUSE_FACTOR = 1.0
# while a backlog is sealed, hand freed pages back to the file system this often
RECLAIM_EVERY_BLOCKS = 64
# a progress line this often while a large backlog (a migration) is sealed
PROGRESS_SECONDS = 10.0
# how long a /flush waits for readers of older snapshots before leaving the WAL for later
FLUSH_WAL_WAIT_MS = 5000
# Lines pushed into closed windows (late lines, or new streams whose first push spans the
# hour) are sealed once pushes pause this long, or LATE_DEFER_SECONDS after they first came
# at the latest. Sealed at once, 20,000 new pods' first lines before the hour were 20,000
# blocks of a few lines each, looked for and encoded between the pushes (a fifth of the
# push's time); Loki's ingester likewise flushes a chunk after it has been idle.
QUIET_SECONDS = 1.0
LATE_DEFER_SECONDS = 30.0
# late streams looked at and sealed in one round at most: 100,000 new pods' late lines in
# one round raised the server's peak RSS by 15 MB
LATE_LOOK_STREAMS = 5_000


def _read_and_encode_many(conn: Any, groups: list[tuple[int, int, int, bool]], limit: int,
                          max_id: int | None = None) -> list[sealing.Prepared | None]:
    return [sealing.read_group(conn, sid, lo, hi, limit, max_id, packs)
            for sid, lo, hi, packs in groups]


@dataclass
class _Round:
    """What one sealing round has done, for its progress lines."""
    pending: int
    last_note: float
    sealed: int = 0
    repacked: bool = False  # a pack's later lines went back into the head as a new pack


class Sealer:
    def __init__(self, db: Any, *, window_ns: int, grace_ns: int,
                 max_rows: int = sealing.DEFAULT_MAX_ROWS, enabled: bool = True,
                 interval: float = INTERVAL_SECONDS,
                 clock: Callable[[], int] = time.time_ns,
                 gate: Callable[[], Awaitable[int | None]] | None = None,
                 compact_elsewhere: Callable[[], None] | None = None):
        self.db = db
        # storage.backend: clickhouse: nothing to seal; /flush merges ClickHouse's parts
        self.compact_elsewhere = compact_elsewhere
        self.window_ns, self.grace_ns, self.max_rows = window_ns, grace_ns, max_rows
        self.enabled = enabled
        self.interval = interval
        self.clock = clock
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._lock: asyncio.Lock | None = None
        self._writes_seen = 0
        self.late_lines = LateLines()
        self.pending = PendingHead(window_ns, grace_ns, max_rows, clock)
        # another service that must read head rows before they leave (the pattern miner):
        # awaited before each round, it answers the highest entry id that may be sealed
        self.gate = gate
        self._stopping = False
        self.blocks_written = 0
        self.rows_sealed = 0
        self._round = _Round(0, 0.0)
        self.failure: str | None = None

    # -- hooks ---------------------------------------------------------------------------------
    def notify(self, _tenant: str = "", result: Any = None) -> None:
        """A push committed (called in the event loop)."""
        self._writes_seen += 1
        self.late_lines.pushed()
        if self._wake is not None and self.pending.pushed(result):
            self._wake.set()

    async def start(self) -> None:
        self._lock = asyncio.Lock()
        if not self.enabled:
            return
        self._wake = asyncio.Event()
        self._wake.set()  # whatever the last run (or an older release) left in the head
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sealer")

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        await cancel_task(task)

    # -- the loop --------------------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wake is not None
        backoff = 0.5
        while not self._stopping:
            try:
                # not asyncio.wait_for: in Python 3.11 it can swallow a cancel that arrives
                # as the event fires, and stop() would then wait forever
                sleep = self.late_lines.sleep(self.pending.timeout(self.interval))
                async with asyncio.timeout(sleep):
                    await self._wake.wait()
            except TimeoutError:
                pass  # windows close as time passes, pushes or not
            self._wake.clear()
            if self.late_lines.put_off(self.pending.late_only()):
                continue
            try:
                await self.seal_due()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the service alive; retry later
                self.failure = f"{type(exc).__name__}: {exc}"
                log.warning("sealing failed, retrying in %.1fs: %s", backoff, self.failure)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)
                self._wake.set()
            else:
                self.failure = None
                backoff = 0.5
                if self.pending.late:
                    self._wake.set()  # late streams beyond one look's share
                else:
                    self.late_lines.caught_up()

    async def seal_due(self, everything: bool = False) -> int:
        """Seal every group that is due (all of the head with `everything`, as /flush asks);
        return the rows sealed."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if everything and self.compact_elsewhere is not None:
                await asyncio.to_thread(self.compact_elsewhere)
            return await self._seal_due(everything)

    async def seal_tenant(self, tenant: str, matchers) -> int:
        """Seal the whole head of one tenant's streams (those matching, if matchers are
        given): /flush/tenant."""
        ids = set(await self.db.read(select_stream_ids, tenant, matchers))
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await self._seal_due(True, ids)

    async def _seal_due(self, everything: bool, only: set[int] | None = None) -> int:
        """Rounds until one moved no pack's lines on into a later window (a push that
        spanned windows is sealed window by window, each round the next)."""
        sealed = 0
        while True:
            sealed += await self._seal_round(everything, only)
            if not self._round.repacked:
                return sealed

    async def _seal_round(self, everything: bool, only: set[int] | None) -> int:
        self._round = _Round(0, time.monotonic())
        look = None if everything or only is not None else self.pending.look()
        if look is False:
            return 0
        head = await self.db.read(sealing.scan_head, self.clock(), self.window_ns,
                                  self.grace_ns, self.max_rows, everything, look)
        groups = head.groups
        if only is not None:
            groups = [g for g in groups if g.stream_id in only]
        pending = sum(g.rows for g in groups)
        if not pending:
            self.pending.looked(head, look, complete=only is None)
            if everything:
                await self._tidy(everything)
            else:
                await self._reclaim()  # what a round cut short (a restart) left free
            return 0
        max_id = await self.gate() if self.gate is not None else None
        started = time.monotonic()
        self._round = _Round(pending, started)
        cutoff = self.clock() - self.grace_ns
        i = 0
        while i < len(groups):
            # small groups many to a writer job; a group of more than a block's rows alone
            batch = self._small_batch(groups, i) or groups[i:i + 1]
            i += len(batch)
            for g in await self._seal_batch(batch, everything, cutoff, max_id):
                while await self._seal_batch([g], everything, cutoff, max_id):
                    pass  # block after block, until the group is sealed or its window open
        sealed = self._round.sealed
        # due rows left behind (an open window the miner holds back, a changed head) are
        # looked for again at the next push
        self.pending.looked(head, look, complete=only is None and sealed == pending)
        await self._tidy(everything)
        await asyncio.to_thread(memory.trim)  # the rows and blocks of the round are gone
        if time.monotonic() - started > PROGRESS_SECONDS:
            log.warning("sealing: done, %d rows in %.0f s", sealed, time.monotonic() - started)
        return sealed

    def _small_batch(self, groups: list, i: int) -> list:
        """The groups from i on that fit one block each, as many as one writer job takes."""
        batch, rows = [], 0
        for k in range(i, len(groups)):  # islice would walk groups[:i] again every batch
            g = groups[k]
            if g.rows >= self.max_rows or len(batch) >= sealing.BATCH_BLOCKS \
                    or (batch and rows + g.rows > sealing.BATCH_ROWS):
                break
            batch.append(g)
            rows += g.rows
        return batch

    async def _seal_batch(self, batch: list, everything: bool, cutoff: int,
                          max_id: int | None) -> list:
        """Seal a block of each group with one read and one writer job (one commit for
        them all); return the groups with rows left to seal: one whose rows (or merged
        block) changed meanwhile, and one that filled a whole block."""
        seen = self._writes_seen
        t0 = time.perf_counter()
        found = await self.db.read(_read_and_encode_many,
                                   [(g.stream_id, g.lo, g.hi, g.packs > 0) for g in batch],
                                   self.max_rows, max_id)
        items, owners, again = [], [], []
        for g, prepared in zip(batch, found):
            if prepared is None:
                continue
            if not (everything or g.hi <= cutoff or g.packs >= sealing.PACKS_DUE) \
                    and prepared.rows < self.max_rows:
                continue  # an open window: wait until it is full or closes
            items.append((g.stream_id, prepared))
            owners.append(g)
        if not items:
            return again
        stored = await self.db.write(lambda conn, it=items: sealing.store_many(conn, it))
        for g, (_, prepared), ok in zip(owners, items, stored):
            if not ok or prepared.rows >= self.max_rows:
                again.append(g)  # read again / the rest of a group that grew
            if ok:
                self._round.repacked |= prepared.repack is not None
                await self._stored(prepared.rows)
        await self._yield_to_pushes(seen, t0)
        return again

    async def _stored(self, rows: int) -> None:
        r = self._round
        self.blocks_written += 1
        self.rows_sealed += rows
        r.sealed += rows
        if time.monotonic() - r.last_note > PROGRESS_SECONDS:
            r.last_note = time.monotonic()
            log.warning("sealing: %d of %d head rows sealed (%.0f%%)", r.sealed, r.pending,
                        100.0 * r.sealed / r.pending)
        if self.blocks_written % RECLAIM_EVERY_BLOCKS == 0:
            await self.db.write(sealing.reclaim_space)

    async def _yield_to_pushes(self, seen: int, t0: float) -> None:
        if self._writes_seen != seen:
            await asyncio.sleep((time.perf_counter() - t0) * PAUSE_FACTOR)

    async def _tidy(self, everything: bool) -> None:
        """After a round: the pages it freed go back to the file system, and the WAL is
        copied into the database and emptied, so a store at rest is its database file alone
        (a flush waits a moment for readers of older snapshots; a background round does not
        wait and tries again next time). A flush gives back every free page: a round keeps
        up to MIN_FREE_PAGES for new rows to reuse, and those were 0.9 MB (0.006 x raw) of
        the realistic set's 26.9 MB after one /flush and none after another."""
        await self._reclaim(1 if everything else sealing.MIN_FREE_PAGES)
        await self.db.truncate_wal(FLUSH_WAL_WAIT_MS if everything else 0)

    async def _reclaim(self, min_free_pages: int = sealing.MIN_FREE_PAGES) -> None:
        # a few thousand pages per writer job, so pushes get the writer in between
        before = None
        while True:
            left = await self.db.write(
                lambda conn: sealing.reclaim_space(conn, min_free_pages=min_free_pages))
            if left < min_free_pages or left == before:
                return
            before = left

    def status(self) -> dict[str, Any]:
        return {"blocks_written": self.blocks_written, "rows_sealed": self.rows_sealed,
                "running": self._task is not None and not self._task.done(),
                "last_error": self.failure}


class LateLines:
    """When the sealer looks at the streams that got lines into closed windows: once pushes
    have paused for QUIET_SECONDS, or LATE_DEFER_SECONDS after the look was first put off
    while they kept coming. Once begun, the looks go on, a share of the streams each,
    until none is left, pushes or not (else 100,000 late streams would wait 30 s a share)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic):
        self.monotonic = monotonic
        self.last_push = float("-inf")
        self.since: float | None = None  # when the look was first put off
        self.going = False  # the looks began and late streams are left

    def pushed(self) -> None:
        self.last_push = self.monotonic()

    def caught_up(self) -> None:
        """No late stream is left: the next late lines wait again."""
        self.since, self.going = None, False

    def put_off(self, late_only: bool) -> bool:
        """Whether a look that would be at late lines' streams alone (`late_only`) waits."""
        if not late_only:  # none left, or a look at the whole head takes them all
            self.caught_up()
            return False
        if self.going:
            return False
        now = self.monotonic()
        if self.since is None:
            self.since = now
        if now - self.last_push >= QUIET_SECONDS or now - self.since >= LATE_DEFER_SECONDS:
            self.since, self.going = None, True
            return False
        return True

    def sleep(self, timeout: float) -> float:
        """The sealer's sleep (`timeout` otherwise): while a look is put off, until the
        pushes may have paused or the look is due in any case."""
        if self.since is None:
            return timeout
        now = self.monotonic()
        return max(0.0, min(timeout, self.last_push + QUIET_SECONDS - now,
                            self.since + LATE_DEFER_SECONDS - now))


class PendingHead:
    """What the sealer knows of the head between two looks at it, so that a push wakes it
    only when something may be due: a look reads every head row's key, and a look per push
    made ingest with thousands of streams quadratic.

    A group becomes due when its window closes (the earliest such moment is kept), when it
    reaches `max_rows` (it can only once one stream's rows pushed since the look could have
    filled the largest open group) or PACKS_DUE packs (likewise), or at once when a push brings
    lines into a closed window (then only those streams need a look)."""

    def __init__(self, window_ns: int, grace_ns: int, max_rows: int,
                 clock: Callable[[], int]):
        self.window_ns, self.grace_ns, self.max_rows, self.clock = \
            window_ns, grace_ns, max_rows, clock
        self.known = False  # False until a look at the whole head left nothing due
        self.next_due_ns: int | None = None
        self.largest_open = 0
        # a bound on the rows any one stream got since the look: per push, the most one
        # stream got (the push's total instead called a look at the whole head every two
        # pushes of 500 new streams, and a look reads every head row's key: 100,000 new
        # streams spent 11 of their 16 s pushing in looks)
        self.rows_since = 0
        # the same for packs (a group is due at PACKS_DUE): packs of the group not due with
        # the most, and the most packs one stream got since (a count over all streams would
        # call a look per push of thousands of streams; streams of small pushes, which get
        # rows, are not kept)
        self.most_packs_open = 0
        self.packs_since: dict[int, int] = {}
        self.most_packs_since = 0
        self.late: set[int] = set()  # streams with lines pushed into closed windows

    def pushed(self, result: Any) -> bool:
        """Count a committed push; whether the sealer should look now. Counted also while
        nothing is known: a push that commits while a look at the whole head is under way
        may come after the head was read, and its late streams must not be forgotten when
        that look completes."""
        if result is None:
            return True
        self.rows_since += max((len(rows) for _, _, rows in result.written), default=0)
        since = self.packs_since
        for sid in result.packed:
            n = since[sid] = since.get(sid, 0) + 1
            if n > self.most_packs_since:
                self.most_packs_since = n
        now = self.clock()
        for sid, first in result.firsts:
            due = first - first % self.window_ns + self.window_ns + self.grace_ns
            if due <= now:
                self.late.add(sid)
            elif self.next_due_ns is None or due < self.next_due_ns:
                self.next_due_ns = due
        return bool(self.late) or self._whole_head_due(now)

    def _whole_head_due(self, now: int) -> bool:
        return (not self.known or self.largest_open + self.rows_since >= self.max_rows
                or self.most_packs_open + self.most_packs_since >= sealing.PACKS_DUE
                or (self.next_due_ns is not None and self.next_due_ns <= now))

    def late_only(self) -> bool:
        """Whether the next look is at late lines' streams alone (nothing else may be due)."""
        return bool(self.late) and not self._whole_head_due(self.clock())

    def timeout(self, interval: float) -> float:
        """How long the sealer may sleep: the interval, or less when a window closes sooner."""
        if not self.known or self.next_due_ns is None:
            return interval
        return max(0.0, min(interval, (self.next_due_ns - self.clock()) / 1e9))

    def look(self) -> list[int] | None | bool:
        """The streams the next look must cover (None: the whole head; False: nothing can be
        due, no look at all); starts the look."""
        if self._whole_head_due(self.clock()):
            self.known, self.rows_since, self.next_due_ns = False, 0, None
            self.packs_since, self.most_packs_since = {}, 0
            self.late = set()
            return None
        if not self.late:
            return False  # a timer wake before anything is due: a look would find nothing
        streams = sorted(self.late)
        if len(streams) > LATE_LOOK_STREAMS:
            streams = streams[:LATE_LOOK_STREAMS]
            self.late.difference_update(streams)
        else:
            self.late = set()
        return streams

    def looked(self, head: sealing.HeadScan, streams: list[int] | None,
               complete: bool) -> None:
        """What a look found pending, once its due groups were sealed (`complete`); a look
        at some streams adds to what is known of the others."""
        if not complete:
            self.known = False
            return
        if head.next_due_ns is not None and (self.next_due_ns is None
                                             or head.next_due_ns < self.next_due_ns):
            self.next_due_ns = head.next_due_ns
        if streams is None:
            self.largest_open, self.known = head.largest_open, True
            self.most_packs_open = head.most_packs_open
        else:
            self.largest_open = max(self.largest_open, head.largest_open)
            self.most_packs_open = max(self.most_packs_open, head.most_packs_open)


def collector(sealer: Sealer) -> ScrapeCollector:
    return ScrapeCollector(
        counter("logstore_sealer_blocks_written", "Blocks the sealer wrote since start.",
                lambda: sealer.blocks_written),
        counter("logstore_sealer_rows_sealed",
                "Head rows the sealer moved into blocks since start.",
                lambda: sealer.rows_sealed))
