"""Live tail: a hub that hands every committed push to the tail sessions of its tenant.

The ingester calls `TailHub.on_written(tenant, result)` in the event loop after each commit
(one of `Ingester.written_listeners`); nothing polls the entries table. Each `Tailer` keeps
only the rows of streams its selector accepts, in a bounded buffer; its sender runs the
compiled pipeline over them and turns the survivors into frames of at most 100 entries. When
the buffer is full (the client reads too slowly, or the pipeline cannot keep up), further
rows are not kept: those the pipeline would have sent are reported as `dropped_entries` in
the next frame (at most 1000 per frame), and memory stays bounded.

Frames are the JSON objects of http-api.md §8 (`{"streams": [...], "dropped_entries": [...]}`)
or, for `/api/compat/tail`, the legacy shape of §15.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import msgspec

from logql.plan import LogPlan
from logql.pipeline.builder import LabelsBuilder
from logql.engine.results import categorized_labels
from logql.model import canonical_labels
from services.ingest.prepare import rfc3339

MAX_ENTRIES_PER_FRAME = 100
MAX_DROPPED_PER_FRAME = 1000
MAX_TAILS_PER_TENANT = 10          # Loki's max_concurrent_tail_requests default
MAX_TAIL_SECONDS = 3600.0          # Loki's tail max duration
MAX_PENDING_ROWS = 20_000          # rows buffered per session before dropping
MAX_PENDING_BYTES = 16 * 2**20     # line bytes buffered per session before dropping
MAX_DROPPED_KEPT = 10_000          # dropped-entry records kept per session between frames
# batches at least this large run the pipeline on a worker thread, off the event loop
THREAD_BATCH_ROWS = 500

_decode_md = msgspec.json.Decoder(dict[str, str]).decode


@dataclass
class _Pending:
    sid: int
    labels: dict[str, str]
    ts: int
    line: str
    metadata: str | None


class Tailer:
    """One tail session: what it selects, what is waiting to be sent, what was dropped."""

    def __init__(self, tenant: str, plan: LogPlan, *, categorize: bool = False,
                 legacy: bool = False, delay_seconds: float = 0.0,
                 max_pending_rows: int = MAX_PENDING_ROWS,
                 max_pending_bytes: int = MAX_PENDING_BYTES):
        self.tenant = tenant
        self.plan = plan
        self.categorize = categorize
        self.legacy = legacy
        self.delay = delay_seconds
        self.max_pending_rows = max_pending_rows
        self.max_pending_bytes = max_pending_bytes
        self._pending: list[_Pending] = []
        self._pending_bytes = 0
        self._dropped: list[tuple[dict[str, str], int]] = []
        self._wake = asyncio.Event()
        self._selected: dict[int, bool] = {}
        self._sender_pipes: dict[int, Any] = {}   # used by the sender only
        self._drop_pipes: dict[int, Any] = {}     # used by offer() only (event loop)
        self._md_cache: dict[str, dict[str, str]] = {}
        # (ts, line, label key) of entries already sent as history: skipped once if they
        # arrive again live (pushed between subscribing and the history snapshot)
        self._sent_history: set[tuple] = set()
        self.closed = False

    # -- producer side (event loop, called by the hub after each commit) ---------------------
    def offer(self, written: Iterable[tuple[int, dict[str, str], list[tuple]]]) -> None:
        for sid, labels, rows in written:
            if not self._selects(sid, labels):
                continue
            for ts, _hash, line, md in rows:
                size = len(line)
                if (len(self._pending) >= self.max_pending_rows
                        or self._pending_bytes + size > self.max_pending_bytes):
                    self._drop(sid, labels, ts, line, md)
                    continue
                self._pending.append(_Pending(sid, labels, ts, line, md))
                self._pending_bytes += size
        if self._pending or self._dropped:
            self._wake.set()

    def _selects(self, sid: int, labels: dict[str, str]) -> bool:
        hit = self._selected.get(sid)
        if hit is None:
            hit = all(m.matches(labels.get(m.name, "")) for m in self.plan.matchers)
            self._selected[sid] = hit
        return hit

    def _drop(self, sid: int, labels: dict[str, str], ts: int, line: str,
              md: str | None) -> None:
        if len(self._dropped) >= MAX_DROPPED_KEPT:
            return
        kept = self._run_pipeline(self._drop_pipes, sid, labels, ts, line, md)
        if kept is not None:
            self._dropped.append((kept[2], ts))

    # -- consumer side -------------------------------------------------------------------------
    async def next_frames(self) -> list[dict] | None:
        """Wait for entries that are due or for dropped-entry reports; return them as frames
        (possibly none when the pipeline filtered everything out). None once the hub closed
        the session (server stopping).

        With `delay_for`, an entry is due once its own timestamp is `delay` in the past (as
        Loki does it), and due entries go out in timestamp order: a writer that is a little
        late still lands in order."""
        while True:
            if self.closed:
                return None
            if not self._pending and not self._dropped:
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._pending and self.delay > 0 and not self._dropped:
                oldest = min(p.ts for p in self._pending)
                wait = (oldest + self.delay * 1e9 - time.time_ns()) / 1e9
                if wait > 0:
                    self._wake.clear()
                    try:  # a drop report (or close) cuts the wait short
                        async with asyncio.timeout(wait):  # wait_for can swallow a cancel
                            await self._wake.wait()
                    except TimeoutError:
                        pass
                    continue
            break
        if self.delay > 0:
            cutoff = time.time_ns() - int(self.delay * 1e9)
            batch = [p for p in self._pending if p.ts <= cutoff]
            self._pending = [p for p in self._pending if p.ts > cutoff]
        else:
            batch, self._pending = self._pending, []
        self._pending_bytes -= sum(len(p.line) for p in batch)
        dropped, self._dropped = self._dropped, []
        if len(batch) >= THREAD_BATCH_ROWS:
            entries = await asyncio.to_thread(self._process, batch)
        else:
            entries = self._process(batch)
        return self.frames(entries, dropped)

    def _process(self, batch: list[_Pending]) -> list[tuple[int, str, tuple, Any]]:
        """(ts, line, label key, categorized extra) of the entries the pipeline keeps."""
        out = []
        for p in batch:
            kept = self._run_pipeline(self._sender_pipes, p.sid, p.labels, p.ts, p.line,
                                      p.metadata)
            if kept is None:
                continue
            line, extra, key = kept[0], kept[1], kept[3]
            if self._sent_history:
                mark = (p.ts, line, key)
                if mark in self._sent_history:
                    self._sent_history.discard(mark)
                    continue
            out.append((p.ts, line, key, extra))
        out.sort(key=lambda e: e[0])  # stable: same-timestamp entries keep arrival order
        return out

    def _run_pipeline(self, pipes: dict, sid: int, labels: dict[str, str], ts: int, line: str,
                      md: str | None):
        """(line, categorized extra, labels dict, label key) or None when filtered out."""
        sp = pipes.get(sid)
        if sp is None:
            sp = pipes[sid] = self.plan.pipeline.for_stream(dict(sorted(labels.items())))
        sm = None
        if md is not None:
            sm = self._md_cache.get(md)
            if sm is None:
                try:
                    sm = _decode_md(md)
                except msgspec.DecodeError:
                    sm = {}
                if len(self._md_cache) > 10_000:
                    self._md_cache.clear()
                self._md_cache[md] = sm
        try:
            out = sp.process(ts, line, sm)
        except Exception:  # noqa: BLE001 - a pipeline error drops the entry, as in queries
            return None
        if out is None:
            return None
        new_line, builder = out
        return new_line, *_labels_of(builder, self.categorize)

    # -- history -------------------------------------------------------------------------------
    def remember_history(self, result: list[dict]) -> list[tuple[int, str, tuple, Any]]:
        """Flatten a query `streams` result into entries, oldest first, and remember them so
        that a live copy is not sent twice."""
        entries = []
        for stream in result:
            key = tuple(sorted(stream["stream"].items()))
            for value in stream["values"]:
                ts, line = int(value[0]), value[1]
                extra = value[2] if len(value) > 2 else None
                entries.append((ts, line, key, extra))
                self._sent_history.add((ts, line, key))
        entries.sort(key=lambda e: e[0])
        return entries

    # -- frames --------------------------------------------------------------------------------
    def frames(self, entries: list[tuple[int, str, tuple, Any]],
               dropped: list[tuple[dict[str, str], int]] = ()) -> list[dict]:
        out = []
        for i in range(0, len(entries), MAX_ENTRIES_PER_FRAME):
            out.append(self._frame(entries[i:i + MAX_ENTRIES_PER_FRAME]))
        dropped = list(dropped)
        i = 0
        while dropped[i:i + MAX_DROPPED_PER_FRAME]:
            chunk = dropped[i:i + MAX_DROPPED_PER_FRAME]
            if i // MAX_DROPPED_PER_FRAME >= len(out):
                out.append(self._frame([]))
            self._attach_dropped(out[i // MAX_DROPPED_PER_FRAME], chunk)
            i += MAX_DROPPED_PER_FRAME
        return out

    def _frame(self, entries: list[tuple[int, str, tuple, Any]]) -> dict:
        groups: dict[tuple, list] = {}
        for ts, line, key, extra in entries:
            values = groups.setdefault(key, [])
            if self.legacy:
                values.append({"ts": rfc3339(ts), "line": line})
            elif self.categorize:
                values.append([str(ts), line, extra or {}])
            else:
                values.append([str(ts), line])
        ordered = sorted(groups.items(), key=lambda kv: canonical_labels(dict(kv[0])))
        if self.legacy:
            return {"streams": [{"labels": canonical_labels(dict(k)), "entries": v}
                                for k, v in ordered],
                    "dropped_entries": None}
        frame: dict[str, Any] = {"streams": [{"stream": dict(k), "values": v}
                                             for k, v in ordered]}
        if self.categorize:
            frame["encodingFlags"] = ["categorize-labels"]
        return frame

    def _attach_dropped(self, frame: dict, dropped: list[tuple[dict[str, str], int]]) -> None:
        if self.legacy:
            frame["dropped_entries"] = [{"Timestamp": rfc3339(ts),
                                         "Labels": canonical_labels(labels)}
                                        for labels, ts in dropped]
        else:
            frame["dropped_entries"] = [{"labels": labels, "timestamp": str(ts)}
                                        for labels, ts in dropped]


def _labels_of(builder: LabelsBuilder, categorize: bool) -> tuple[Any, dict[str, str], tuple]:
    """(categorized extra or None, labels to report, grouping key)."""
    if categorize:
        stream, extra = categorized_labels(builder)
        labels = dict(sorted(stream.items()))
        return extra, labels, tuple(labels.items())
    labels = dict(builder.labels())
    return None, labels, tuple(labels.items())


class TooManyTails(Exception):
    pass


class TailHub:
    """Tenant -> live tail sessions; fed by the ingester after every commit."""

    def __init__(self, max_of: Callable[[str], int] = lambda _t: MAX_TAILS_PER_TENANT):
        # `limits_config.max_concurrent_tail_requests` of a tenant (runtime overrides apply)
        self.max_of = max_of
        self._tailers: dict[str, list[Tailer]] = {}

    def add(self, tailer: Tailer) -> None:
        current = self._tailers.setdefault(tailer.tenant, [])
        limit = self.max_of(tailer.tenant)
        if len(current) >= limit:
            if not current:
                del self._tailers[tailer.tenant]
            raise TooManyTails("max concurrent tail requests limit exceeded, count > limit "
                               f"({len(current) + 1} > {limit})")
        current.append(tailer)

    def remove(self, tailer: Tailer) -> None:
        current = self._tailers.get(tailer.tenant)
        if current and tailer in current:
            current.remove(tailer)
            if not current:
                del self._tailers[tailer.tenant]

    def on_written(self, tenant: str, result: Any) -> None:
        tailers = self._tailers.get(tenant)
        if not tailers or result is None:
            return
        for tailer in list(tailers):
            tailer.offer(result.written)

    def count(self, tenant: str | None = None) -> int:
        if tenant is not None:
            return len(self._tailers.get(tenant, ()))
        return sum(len(t) for t in self._tailers.values())

    def close_all(self) -> None:
        for tailers in self._tailers.values():
            for tailer in tailers:
                tailer.closed = True
                tailer._wake.set()

    async def stop(self) -> None:
        self.close_all()
