"""Log deletion (spec/http-api.md section 14): requests, query-time filtering, physical removal.

A request (`{app="a"} |= "token"`, start, end) is stored per tenant and, from the moment it
is accepted, hides the lines it names from every read: `pending_of(tenants)` gives a read
the active pieces of its tenants, and `filters_matching` the (start, end, line predicate)
of each whose selector matches a stream (services/read/readers.py,
services/read/visibility.py). After `compactor.delete_request_cancel_period` the
compactor (services/upkeep/compactor.py) removes the lines from disk, piece by piece
(storage/deletes.py), marks the piece processed and stops filtering it. With
`limits_config.deletion_mode: filter-only` nothing is removed and the filter stays.

Nodes sharing the requests (storage.shared.url) re-read them every `refresh` seconds, so a
request made on another node hides lines here at most that much later (Loki's queriers
cache the requests they fetch from the compactor for five minutes).
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import Any, Callable, Sequence

from services.runtime.base import cancel_task
from logql.gocompat.format import go_duration_str
from logql.gocompat.values import parse_go_duration
from logql.plan import compile_log_query
from services.runtime.errors import PlainError
from services.runtime.limits import Limits
from services.upkeep.delete_filters import (ActiveFilter, bad_request as _bad, compiled_delete,
                                            parse_delete_query)
from storage import deletes
from storage.batches import bounded_batches
from storage.blocks import codec as blocks

log = logging.getLogger("logstore.deletes")
MODES = ("disabled", "filter-only", "filter-and-delete")
MAX_INTERVAL_CAP = 24 * 3600 * 10**9
# sealed blocks rewritten per writer job (more of them, up to MAX_REWRITE_BATCH, while they
# hold fewer than REWRITE_ROWS rows in all), and the pause after each batch (x its duration)
REWRITE_BATCH = 16
MAX_REWRITE_BATCH = 256
REWRITE_ROWS = 50_000
PAUSE_FACTOR = 1.0
# head rows removed per writer job, of many streams
HEAD_ROWS = 2000
# matched streams whose head rows and blocks one read lists
DELETE_STREAMS = 500
_UNIX_SECONDS = re.compile(r"[0-9]{10}\Z")  # ASCII only, no trailing newline: Go's reading


@dataclass(frozen=True)
class Piece:
    tenant: str
    request_id: str
    seq: int
    query: str
    start: int
    end: int
    created_at: float
    processed: bool


def parse_time(text: str, what: str) -> int:
    """RFC 3339 or exactly ten digits of Unix seconds -> ns."""
    err = _bad(f"invalid {what} time: require unix seconds or RFC3339 format")
    if _UNIX_SECONDS.match(text):
        return int(text) * 10**9
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise err from None
    if dt.tzinfo is None:
        raise err
    return int(dt.timestamp()) * 10**9 + dt.microsecond * 1000


class Deletions:
    def __init__(self, db: Any, cfg: Any, limits: Limits,
                 clock: Callable[[], int] = time.time_ns,
                 removed_listeners: Sequence[Callable[[int, list[tuple[int, str]]], Any]] = (),
                 requests: Any = None, refresh: float | None = None):
        self.db = db  # the log data SQLite removes lines from
        # the requests themselves: shared by every node of a cluster (storage/shared)
        self.requests = requests or db
        self.refresh = refresh  # seconds between re-reads of the requests (None: one node)
        self._task: asyncio.Task | None = None
        self.limits = limits
        self.enabled = cfg.compactor.retention_enabled
        self.cancel_period = cfg.compactor.delete_request_cancel_period
        self.max_interval = cfg.compactor.delete_max_interval
        self.clock = clock
        # tenant -> filters of the pieces still hiding lines; replaced whole, never mutated,
        # so reader threads always see one consistent set
        self._filters: dict[str, list[ActiveFilter]] = {}
        self.pieces_processed = 0
        self.lines_deleted = 0
        self.bytes_deleted = 0
        self.touched: set[int] = set()  # streams lines were removed from, for the compactor
        # told (stream, [(ts, line)]) of every batch removed from disk: counts kept
        # elsewhere (the patterns') follow
        self.removed_listeners = list(removed_listeners)
        self.status_counts: dict[str, int] = {}  # requests per status, for /metrics

    def mode_of(self, tenant: str) -> str:
        return self.limits.of(tenant).deletion_mode

    def check_enabled(self, tenant: str) -> None:
        if not self.enabled or self.mode_of(tenant) == "disabled":
            raise _bad("Retention is not enabled")

    # -- the filter the reads apply ---------------------------------------------------------------
    def pending_of(self, tenants: Sequence[str]) -> tuple[ActiveFilter, ...]:
        """The pieces hiding lines of these tenants, as data."""
        filters = self._filters
        return tuple(f for t in tenants for f in filters.get(t, ()))

    @property
    def active(self) -> bool:
        return bool(self._filters)

    async def start(self) -> None:
        await self.reload()
        if self.refresh is not None:
            self._task = asyncio.get_running_loop().create_task(self._refresh(),
                                                                name="delete-requests")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_task(task)

    async def _refresh(self) -> None:
        assert self.refresh is not None
        while True:
            await asyncio.sleep(self.refresh)
            try:
                await self.reload()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep the filters held; try again
                log.warning("re-reading the delete requests failed: %s: %s",
                            type(exc).__name__, exc)

    async def reload(self) -> None:
        rows = await self.requests.read(deletes.pieces)
        grouped: dict[tuple[str, str], list[Piece]] = {}
        for r in rows:
            grouped.setdefault((r[0], r[1]), []).append(Piece(*r[:7], bool(r[7])))
        counts = {"received": 0, "processing": 0, "processed": 0}
        for ps in grouped.values():
            status = _status(ps)
            counts["processing" if status.endswith("Complete") else status] += 1
        self.status_counts = counts
        filters: dict[str, list[ActiveFilter]] = {}
        for p in (Piece(*r[:7], bool(r[7])) for r in rows):
            if p.processed and self.mode_of(p.tenant) == "filter-and-delete":
                continue
            compiled_delete(p.query)  # a stored request that no longer parses fails here
            filters.setdefault(p.tenant, []).append(
                ActiveFilter(p.tenant, p.query, p.start, p.end))
        self._filters = filters

    # -- the API --------------------------------------------------------------------------------
    async def add(self, tenant: str, params: dict[str, str]) -> str:
        self.check_enabled(tenant)
        text = params.get("query") or ""
        if not text:
            raise _bad("query not set")
        query = parse_delete_query(text)
        if not params.get("start"):
            raise _bad("start time not set")
        start = parse_time(params["start"], "start")
        now = self.clock()
        end = parse_time(params["end"], "end") if params.get("end") else now
        if end > now:
            raise _bad("deletes in the future are not allowed")
        if start >= end:
            raise _bad("start time can't be greater than or equal to end time")
        interval = self._max_interval(params.get("max_interval") or "", start, end)
        pieces = [(start, end)]
        if query.stages and interval:
            pieces, t = [], start
            while t < end:
                pieces.append((t, min(t + interval, end)))
                t += interval
        request_id = secrets.token_hex(4)
        await self.requests.write(lambda conn: deletes.add(
            conn, tenant, request_id, text, pieces, round(now / 1e9, 3)))
        await self.reload()
        return request_id

    def _max_interval(self, text: str, start: int, end: int) -> int:
        if not text:
            return self.max_interval
        if not re.fullmatch(r"(\d+(\.\d+)?[smh])+", text):
            raise _bad("invalid max_interval: valid time units are 's', 'm', 'h'")
        value = parse_go_duration(text)
        if value > MAX_INTERVAL_CAP:
            raise _bad(f"max_interval can't be greater than {go_duration_str(MAX_INTERVAL_CAP)}")
        if value > end - start:
            raise _bad("max_interval can't be greater than the interval to be deleted "
                       f"({go_duration_str(end - start)})")
        if value < 10**9:
            raise _bad("invalid max_interval: valid time units are 's', 'm', 'h'")
        return value

    async def list(self, tenant: str, params: dict[str, str]) -> list[dict]:
        self.check_enabled(tenant)
        lo = hi = None
        if params.get("start") or params.get("end"):
            if not (params.get("start") and params.get("end")):
                raise _bad("both start and end must be set or unset")
            lo = parse_time(params["start"], "start")
            hi = parse_time(params["end"], "end")
        rows = await self.requests.read(deletes.pieces, tenant)
        grouped: dict[str, list[Piece]] = {}
        for r in rows:
            grouped.setdefault(r[1], []).append(Piece(*r[:7], bool(r[7])))
        out = []
        for request_id, ps in grouped.items():
            start, end = min(p.start for p in ps), max(p.end for p in ps)
            if lo is not None and (end < lo or start > hi):
                continue
            out.append({"request_id": request_id, "start_time": _seconds(start),
                        "end_time": _seconds(end), "query": ps[0].query,
                        "status": _status(ps), "created_at": ps[0].created_at,
                        "user_id": ""})
        out.sort(key=lambda d: (d["created_at"], d["request_id"]))
        return out

    async def cancel(self, tenant: str, params: dict[str, str]) -> None:
        self.check_enabled(tenant)
        request_id = params.get("request_id") or ""
        if not request_id:
            raise _bad("request_id not set")
        force = (params.get("force") or "").lower() == "true"
        rows = [r for r in await self.requests.read(deletes.pieces, tenant)
                if r[1] == request_id]
        if not rows:
            raise PlainError(404, "could not find delete request with given id", newline=True)
        done = sum(1 for r in rows if r[7])
        if done == len(rows):
            raise _bad("deletion of request which is in process or already processed is not "
                       "allowed")
        too_late = self.clock() / 1e9 - rows[0][6] > self.cancel_period / 1e9
        if (done or too_late) and not force:
            raise _bad("Cancellation of partially completed delete request or delete request "
                       f"past the deadline of {go_duration_str(self.cancel_period)} since its "
                       "creation is not allowed. To force, use the ?force query parameter")
        await self.requests.write(lambda conn: deletes.cancel(conn, tenant, request_id))
        await self.reload()

    async def generation(self, tenant: str) -> int:
        return await self.requests.read(deletes.generation, tenant)

    async def increase_generation(self, tenant: str) -> None:
        await self.requests.write(lambda conn: deletes.bump_generation(conn, tenant))

    # -- physical removal (the compactor) -------------------------------------------------------
    async def process_due(self, streams: dict[int, tuple[str, dict[str, str], int, int]],
                          removal: Any = None) -> int:
        """Remove from disk the lines of every piece past the cancel period; returns the
        lines removed. `streams`: stream id -> (tenant, labels, first ts, last ts);
        `removal`: ClickHouse's (storage/clickhouse/removal.py) instead of SQLite's."""
        if not self.enabled:
            return 0
        now_s = self.clock() / 1e9
        removed = 0
        for r in await self.requests.read(deletes.pieces):
            p = Piece(*r[:7], bool(r[7]))
            if p.processed or now_s - p.created_at < self.cancel_period / 1e9 \
                    or self.mode_of(p.tenant) != "filter-and-delete":
                continue
            query = parse_delete_query(p.query)
            pick = compile_log_query(query).pipeline.match_line
            # a stream without data in the piece's range needs no statement at all
            sids = [sid for sid, info in streams.items()
                    if info.tenant == p.tenant and info.first_ts <= p.end
                    and info.last_ts >= p.start
                    and all(m.matches(info.labels.get(m.name, ""))
                            for m in query.selector.matchers)]
            if removal is not None:
                removed += await self._remove_elsewhere(removal, p.tenant, sids, p.start,
                                                        p.end, pick)
            else:
                for at in range(0, len(sids), DELETE_STREAMS):
                    done = await self._remove(sids[at:at + DELETE_STREAMS], p.start, p.end,
                                              pick)
                    self.touched.update(sid for sid, n in done.items() if n)
                    removed += sum(done.values())
            await self.requests.write(lambda conn, p=p: deletes.mark_processed(
                conn, p.tenant, p.request_id, p.seq))
            self.pieces_processed += 1
        if removed or self.pieces_processed:
            await self.reload()
        return removed

    async def _remove(self, sids: list[int], start: int, end: int,
                      pick) -> dict[int, int]:
        """The piece's lines removed from these streams; returns the lines removed per
        stream. The head rows of all of them are found in one read, their blocks listed in
        another, and the blocks decoded and filtered a batch at a time across streams: a
        read or two per stream, each a round trip to a reader thread, made a broad delete
        request over 20,000 streams take 29-34 s (issue 22)."""
        removed: dict[int, int] = dict.fromkeys(sids, 0)
        heads, overlapping = await self.db.read(lambda conn: (
            deletes.head_matches(conn, sids, start, end, pick),
            deletes.blocks_overlapping(conn, sids, start, end)))
        sealed_since: set[int] = set()
        for batch in _head_batches(heads):
            gone_of, size, moved = await self.db.write(
                lambda conn, b=batch: deletes.delete_head_rows(conn, b))
            sealed_since |= moved
            self.bytes_deleted += size
            for sid, gone in gone_of.items():
                removed[sid] += len(gone)
                self.lines_deleted += len(gone)
                await self._removed(sid, [(r[1], r[2]) for r in gone])
        if sealed_since:
            # head rows the sealer moved into a block after they were read: that block is
            # not among those listed with them (a block already listed is rewritten once)
            listed = {block_id for _, block_id, _ in overlapping}
            overlapping += [b for b in await self.db.read(
                lambda conn: deletes.blocks_overlapping(conn, sorted(sealed_since), start, end))
                if b[1] not in listed]
        while overlapping:
            moved: set[int] = set()
            for batch in _rewrite_batches(overlapping):
                began = time.perf_counter()
                gone_of, size, left = await self._rewrite(batch, start, end, pick)
                moved |= left
                self.bytes_deleted += size
                for sid, gone in gone_of.items():
                    removed[sid] += len(gone)
                    self.lines_deleted += len(gone)
                    await self._removed(sid, gone)
                # rewriting is CPU work under the GIL: leave as much time to pushes and queries
                await asyncio.sleep((time.perf_counter() - began) * PAUSE_FACTOR)
            # a block that left meanwhile was merged into a newer one by the sealer
            # (storage/blocks/sealing.py): its stream's lines are looked for again there
            overlapping = await self.db.read(
                lambda conn, m=sorted(moved): deletes.blocks_overlapping(conn, m, start, end)) \
                if moved else []
        return removed

    async def _remove_elsewhere(self, removal: Any, tenant: str, sids: list[int], start: int,
                                end: int, pick) -> int:
        """The piece's lines removed from ClickHouse, the matching streams' together."""
        gone_of = await asyncio.to_thread(removal.remove, tenant, sids, start, end, pick)
        for sid, gone in gone_of.items():
            self.lines_deleted += len(gone)
            self.bytes_deleted += sum(size for _, _, size in gone)
            await self._removed(sid, [(ts, line) for ts, line, _ in gone])
            self.touched.add(sid)
        return sum(len(gone) for gone in gone_of.values())

    async def _removed(self, sid: int, rows: list[tuple[int, str]]) -> None:
        for listener in self.removed_listeners:
            if rows:
                await listener(sid, rows)

    async def _rewrite(self, batch: list[tuple[int, int, int]], start: int, end: int,
                       pick) -> tuple[dict[int, list[tuple[int, str]]], int, set[int]]:
        """Rewrite a batch of blocks (stream id, block id, rows): decoded, filtered and
        encoded on a reader thread, then those with lines to remove replaced in one writer
        job (a few tens of milliseconds). Returns the lines removed per stream, their bytes,
        and the streams one of whose blocks was gone by then."""
        def prepare(conn):
            out = []
            missing: set[int] = set()
            for sid, block_id, _ in batch:
                rows, pack = deletes.block_contents(conn, block_id)
                if not rows:
                    missing.add(sid)
                gone = [r for r in rows if start <= r[1] <= end and pick(r[2])]
                if gone:
                    keep = [r for r in rows if not (start <= r[1] <= end and pick(r[2]))]
                    out.append((sid, block_id, keep, gone,
                                blocks.encode(keep, pack=pack) if keep else None))
            return out, missing

        def apply(conn, prepared):
            lines: dict[int, list[tuple[int, str]]] = {}
            size = 0
            left: set[int] = set()
            for sid, block_id, keep, gone, encoded in prepared:
                removed = deletes.rewrite_block(conn, sid, block_id, keep, gone, encoded)
                if removed is None:
                    left.add(sid)
                else:
                    lines.setdefault(sid, []).extend((r[1], r[2]) for r in gone)
                    size += removed
            return lines, size, left

        prepared, missing = await self.db.read(prepare)
        if not prepared:
            return {}, 0, missing
        lines, size, left = await self.db.write(lambda conn: apply(conn, prepared))
        return lines, size, left | missing


def _head_batches(heads: dict[int, list[deletes.Row]]
                  ) -> list[list[tuple[int, list[deletes.Row]]]]:
    """The picked head rows, (stream id, rows) in writer jobs of up to HEAD_ROWS rows and
    DELETE_STREAMS streams: a job per stream made a delete of a line in each of 20,000
    pods 20,000 commits."""
    parts = [(sid, rows[i:i + HEAD_ROWS]) for sid, rows in heads.items()
             for i in range(0, len(rows), HEAD_ROWS)]
    return bounded_batches(parts, lambda part: len(part[1]), HEAD_ROWS, DELETE_STREAMS)


def _rewrite_batches(overlapping: list[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    """Blocks (stream id, block id, rows) in batches of REWRITE_BATCH, or more small ones
    up to REWRITE_ROWS rows in all (a quiet stream's block holds a few lines)."""
    return bounded_batches(overlapping, itemgetter(2), REWRITE_ROWS, MAX_REWRITE_BATCH,
                           min_items=REWRITE_BATCH)


def _seconds(ns: int) -> int | float:
    ms = ns // 10**6
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def _status(pieces: list[Piece]) -> str:
    done = sum(1 for p in pieces if p.processed)
    if done == 0:
        return "received"
    if done == len(pieces):
        return "processed"
    return f"{done * 100 // len(pieces)}% Complete"
