"""Push processing: a push's body decoded and validated (services/ingest/prepare.py, in a
query worker process for a large body), the tenant's rate limits, then one group commit.
Under load, a push whose streams are plain columns and pass every check is answered once in
the push log instead, and stored with the pushes around it (services/ingest/pending.py).

A request is checked stream by stream and entry by entry; what is valid is written even when
other parts are refused (as Loki does), and the caller learns every refusal.
"""

from __future__ import annotations

import errno
import logging
import time
from typing import Awaitable, Callable, Protocol, Sequence

from logql.errors import StoreUnavailable
from services.ingest.decode import JSON_MEDIA, decode_body, snappy_size
from services.ingest.ingest_limits import IngestLimits
from services.ingest.inflight import Held
from services.ingest.otlp import OtlpMapper, decode_otlp
from services.ingest.pending import PendingPushes
from services.ingest.records import CheckedPush, checked_push, without_streams
from services.ingest.prepare import Preparer, PushError, PushOutcome, RawStream
from services.read.query_pool import QueryPool
from services.read.query_worker import PrepareJob
from services.runtime.limits import Limits
from storage.clickhouse.client import UNREACHABLE
from storage.db import Database, DiskFull
from storage.entries import DEFAULT_WINDOW_NS, AppendResult, PreparedStream, append
from storage.push_log import PushLogError

log = logging.getLogger("logstore.ingester")

WrittenListener = Callable[[str, AppendResult], None]

# While other pushes are in the server, a body that inflates to at least this much is
# decoded and validated in an idle query worker: the server's interpreter then only
# unpickles the rows (0.2 ms for 1,000 lines against 4.4 ms to decode and validate them), and
# the second core does the rest while the server reads and writes the others. A smaller
# body, or a push alone (one client sending one push after another: nothing to overlap
# with), is done here: the round trip to a worker would only add to its time (pickling
# both ways took 12 ms of a 24 ms push of 500 new streams).
ELSEWHERE_BYTES = 16 << 10
# ...and at most this much: the body is copied into the request to the worker and decoded
# there, so a 100 MiB push would be held twice over, outside the in-flight bytes' count.
# Promtail's and Alloy's batches are 1 MiB by default.
ELSEWHERE_MAX_BYTES = 4 << 20


class LogAppender(Protocol):
    """Where pushes go when log data does not live in the SQLite file (storage.backend:
    clickhouse): `append` returns once the rows are stored, or raises StoreUnavailable
    (nothing acknowledged: the push answers 503 and the client sends it again);
    `available` is False while the store cannot be reached (/ready answers 503)."""
    available: bool

    def append(self, tenant: str, streams: list[PreparedStream]) -> Awaitable[AppendResult]: ...

def tell_written(listeners: Sequence[WrittenListener], tenant: str,
                 result: AppendResult) -> None:
    """Tell the listeners of a stored push (or of a batch of the push log's)."""
    for listener in listeners:
        try:
            listener(tenant, result)
        except Exception:  # noqa: BLE001 - one listener must not break a push reply
            log.exception("on_written listener failed")


# after /ingester/shutdown (services/upkeep/shutdown.py), as Loki's ingester answers then
STOPPING_TEXT = "Ingester is stopping or already stopped."


class Ingester:
    def __init__(self, db: Database, limits: Limits, *,
                 ingest_limits: IngestLimits | None = None,
                 written_listeners: Sequence[WrittenListener] = (),
                 appender: LogAppender | None = None, workers: QueryPool | None = None,
                 pending: PendingPushes | None = None,
                 window_ns: int = DEFAULT_WINDOW_NS):
        self.db = db
        self.appender = appender  # None: the SQLite file's writer
        self.limits = limits
        self.preparer = Preparer(packs=appender is None)
        self.workers = workers  # None: every push is decoded and validated here
        self.window_ns = window_ns  # storage.block_window: a pack holds one window's lines
        # told of every committed push (the sealer, the pattern miner, the tail hub)
        self.written_listeners = tuple(written_listeners)
        self.stopped = False  # set by /ingester/shutdown
        self.ingest_limits = ingest_limits
        # under load, checked pushes are answered from the push log (None: never)
        self.pending = pending

    # -- readiness (/ready) ------------------------------------------------------------------
    @property
    def disk_full(self) -> bool:
        return self.db.disk_full

    @property
    def writer_problem(self) -> str:
        """Why writer_alive is False, as /ready says it."""
        if self.appender is not None:
            return UNREACHABLE
        return "the writer is not running"

    @property
    def writer_alive(self) -> bool:
        if self.appender is not None:
            return self.appender.available
        return self.db.writer_alive

    def _refused(self, tenant: str, streams: list[tuple[str, int, int]],
                 outcome: PushOutcome) -> set[int]:
        """The positions of the streams (canonical labels, lines, bytes) the tenant's limits
        refuse: the tenant's rate (a push over it is refused whole, nothing stored), then
        each stream's, the active-stream limit and the per-stream rate."""
        limits = self.ingest_limits
        text = limits.check_tenant(tenant, sum(s[1] for s in streams),
                                   sum(s[2] for s in streams))
        if text is not None:
            raise PushError(429, text)
        refused = set()
        for i, text in enumerate(limits.check_streams(tenant, streams)):
            if text is not None:
                refused.add(i)
                outcome.errors.append(text)
                outcome.status = 429
                outcome.accepted_lines -= streams[i][1]
        return refused

    def _within_limits(self, tenant: str, prepared: list[PreparedStream],
                       outcome: PushOutcome) -> list[PreparedStream]:
        refused = self._refused(tenant, [(ps.canonical, len(ps.rows), ps.size)
                                         for ps in prepared], outcome)
        for i in refused:
            outcome.accepted_bytes -= sum(len(r[2]) for r in prepared[i].rows)
        return [ps for i, ps in enumerate(prepared) if i not in refused]

    # -- the whole push ------------------------------------------------------------------------
    def _check_running(self) -> None:
        if self.stopped:
            raise PushError(503, STOPPING_TEXT)

    async def push(self, tenant: str, raw_streams: list[RawStream]) -> PushOutcome:
        """Streams already decoded (the legacy JSON push)."""
        self._check_running()
        prepared, outcome = self.preparer.prepare(raw_streams, time.time_ns(),
                                                  self.limits.of(tenant))
        return await self._store(tenant, prepared, outcome)

    async def push_body(self, tenant: str, media: str, body: bytes, limit: int,
                        hold: Held | None, otlp: OtlpMapper | None = None) -> PushOutcome:
        """A push body: Loki's JSON or snappy protobuf (`limit`: the most it may inflate
        to), or with `otlp` (the tenant's mapper) an OTLP/HTTP one, protobuf or JSON."""
        self._check_running()
        lim = self.limits.of(tenant)
        under_load = hold is not None and hold.budget.pushes > 1
        streams, now = None, time.time_ns()
        pending = self.pending
        # under load, or while pushes wait in the log (the clients' pushes come one after
        # another, each answered before the next is sent); not while queries hold every
        # query worker, which would leave the batches to the server's interpreter
        if otlp is None and pending is not None and pending.accepting and \
                (under_load or pending.pending_bytes) and len(body) <= ELSEWHERE_MAX_BYTES \
                and (self.workers is None or self.workers.free_of_queries()):
            # checked here (a C read and the labels' cached checks, no hop to a worker),
            # answered once in the push log, stored with the pushes around it
            streams = decode_body(media, body, limit, hold)
            checked = checked_push(self.preparer, tenant, streams, now, lim)
            if checked is not None:
                return await self._logged(tenant, checked, pending)
        inflated = 0
        if self.workers is not None and under_load:
            inflated = len(body) if media == JSON_MEDIA or otlp is not None else \
                max(snappy_size(body, limit), 0)
        if ELSEWHERE_BYTES <= inflated <= ELSEWHERE_MAX_BYTES:
            if media != JSON_MEDIA and otlp is None and streams is None:
                hold.add(inflated)  # inflated there, held here
            done = await self.workers.prepare_push(PrepareJob(
                media, body, limit, lim, now, otlp.config if otlp is not None else None))
            if done is not None:
                return await self._store(tenant, *done)
            hold = None  # done here after all: its inflated size is counted already
        if streams is None:
            streams = decode_body(media, body, limit, hold) if otlp is None else \
                otlp.streams(decode_otlp(body, media), now)
        prepared, outcome = self.preparer.prepare(streams, now, lim)
        return await self._store(tenant, prepared, outcome)

    async def _logged(self, tenant: str, checked: CheckedPush,
                      pending: PendingPushes) -> PushOutcome:
        """A checked push answered once in the push log (services/ingest/pending.py)."""
        outcome, payload = checked.outcome, checked.payload
        if self.ingest_limits is not None:
            refused = self._refused(tenant, checked.streams, outcome)
            if refused:
                outcome.accepted_bytes -= sum(checked.streams[i][2] for i in refused)
                payload = without_streams(payload, refused)
                if payload is None:
                    return outcome
        try:
            await pending.admit(tenant, payload)
        except PushLogError as exc:
            log.error("push not stored: %s", exc)
            if exc.errno == errno.ENOSPC:
                raise DiskFull(f"the disk is full, nothing was written: {exc}") from None
            raise PushError(503, f"the push could not be made durable: {exc}") from None
        return outcome

    async def _store(self, tenant: str, prepared: list[PreparedStream],
                     outcome: PushOutcome) -> PushOutcome:
        if outcome.discarded and self.ingest_limits is not None:
            for reason, (lines, size) in outcome.discarded.items():
                self.ingest_limits.count_discarded(tenant, reason, lines, size)
        if prepared and self.ingest_limits is not None:
            prepared = self._within_limits(tenant, prepared, outcome)
        if prepared and self.appender is not None:
            try:
                outcome.result = await self.appender.append(tenant, prepared)
            except StoreUnavailable as exc:
                log.error("push not stored: %s", exc)
                raise PushError(503, f"the log store cannot take the push now: {exc}"
                                ) from None
            self.written(tenant, outcome.result)
        elif prepared:
            ids, window = self.db.stream_ids, self.window_ns
            # run again after a rollback (storage/db.py): the append changes only SQLite and
            # the writer's map of stream ids, which a rollback makes it forget
            outcome.result = await self.db.write(lambda conn: append(conn, ids, tenant,
                                                                     prepared, window),
                                                 rerun=True)
            self.written(tenant, outcome.result)
        return outcome

    def written(self, tenant: str, result: AppendResult) -> None:
        tell_written(self.written_listeners, tenant, result)
