"""The indexer service: folds committed entries into the FTS5 trigram index in batches.

Pushes stay one plain insert; this loop follows them. It sleeps until a push commits (the
ingester's `on_written` sets an event), then writes batches of `batch_rows` entries through
`Database.write`, each advancing the high-water mark in the same transaction, until nothing
is left. While pushes keep arriving it pauses between batches for four times as long as the
batch took, so indexing takes at most about a fifth of the writer (and of a small machine's
CPU) and pushes never wait behind a backlog; once pushes pause it runs flat out.
A restart resumes from the stored mark; a slow safety-net check also catches rows written by
any path that does not notify.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from storage import fts

log = logging.getLogger("logstore.indexer")

BATCH_ROWS = 2000
# under push load: pause PAUSE_FACTOR x the batch's duration after each batch
PAUSE_FACTOR = 4.0
# without notifications (another writer), look for unindexed rows this often
SAFETY_NET_SECONDS = 10.0


class _WrittenFanout:
    """`Ingester.on_written` that calls several listeners (tail hub, indexer, ...)."""

    def __init__(self, listeners: list[Callable[..., None]]):
        self.listeners = listeners

    def __call__(self, tenant: str, result: Any) -> None:
        for listener in list(self.listeners):
            try:
                listener(tenant, result)
            except Exception:  # noqa: BLE001 - one listener must not break a push reply
                log.exception("on_written listener failed")


def add_written_listener(ingester: Any, listener: Callable[[str, Any], None]) -> None:
    """Chain `listener` onto `ingester.on_written`, keeping whatever is already there."""
    current = ingester.on_written
    if isinstance(current, _WrittenFanout):
        current.listeners.append(listener)
        return
    ingester.on_written = _WrittenFanout(([current] if current is not None else []) + [listener])


class Indexer:
    def __init__(self, db: Any, *, batch_rows: int = BATCH_ROWS,
                 safety_net_seconds: float = SAFETY_NET_SECONDS):
        self.db = db
        self.batch_rows = batch_rows
        self.safety_net_seconds = safety_net_seconds
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._writes_seen = 0   # pushes notified so far: a change means pushes are active
        self.rows_indexed = 0
        self.batches = 0
        self.failure: str | None = None

    # -- hooks ---------------------------------------------------------------------------------
    def notify(self, _tenant: str = "", _result: Any = None) -> None:
        """A push committed (called in the event loop)."""
        self._writes_seen += 1
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._wake.set()  # catch up on whatever the last run left
        self._task = asyncio.get_running_loop().create_task(self._run(), name="fts-indexer")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    # -- the loop --------------------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wake is not None
        backoff = 0.5
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.safety_net_seconds)
            except asyncio.TimeoutError:
                pass  # the safety net: look anyway
            self._wake.clear()
            try:
                await self.catch_up()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the service alive; retry later
                self.failure = f"{type(exc).__name__}: {exc}"
                log.warning("indexing failed, retrying in %.1fs: %s", backoff, self.failure)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                self._wake.set()
            else:
                self.failure = None
                backoff = 0.5

    async def catch_up(self) -> int:
        """Index until nothing is pending; return the rows added."""
        total = 0
        limit = self.batch_rows
        while True:
            seen = self._writes_seen
            started = time.perf_counter()
            added = await self.db.write(lambda conn: fts.index_batch(conn, limit))
            took = time.perf_counter() - started
            if added:
                total += added
                self.rows_indexed += added
                self.batches += 1
            if added < limit:
                return total
            if self._writes_seen != seen:
                # pushes are arriving: give the writer back to them for a while
                await asyncio.sleep(took * PAUSE_FACTOR)
            else:
                await asyncio.sleep(0)

    def status(self) -> dict[str, Any]:
        return {"rows_indexed": self.rows_indexed, "batches": self.batches,
                "running": self._task is not None and not self._task.done(),
                "last_error": self.failure}


def register(ctx: Any) -> Indexer:
    """Create the indexer, subscribe it to pushes and hook it into the app's lifespan."""
    indexer = Indexer(ctx.db)
    ctx.extras["indexer"] = indexer
    add_written_listener(ctx.ingester, indexer.notify)

    async def on_start(_ctx: Any) -> None:
        await indexer.start()

    async def on_stop(_ctx: Any) -> None:
        await indexer.stop()

    ctx.extras.setdefault("on_start", []).append(on_start)
    ctx.extras.setdefault("on_stop", []).append(on_stop)
    return indexer
