"""The read side of the storage boundary: everything the LogQL engine asks of stored logs.

The engine is handed a `LogReader` (as Prometheus hands its engine a `Queryable`) and never
sees SQL, a connection or a transaction. What it can ask:

    with reader.snapshot(): ...                  one consistent view for a whole evaluation
    reader.select_streams(tenant, matchers, start, end) -> {stream id: labels}
    reader.visible_streams(tenant, groups, start, end) -> {stream id: labels}
    reader.lines(ids, start, end, conditions=..., needles=..., backward=..., ordered=...,
                 limited=...) -> LineScan        row batches (id, stream, ts, line, metadata)
    reader.window_counts(ids, points, want_bytes) -> {(stream, metadata): (lines, bytes)}
    reader.segments(ids, start, end) -> int      storage segments holding [start, end]
    reader.grouped_counts(group_of, points, want_bytes) -> {(group, ""): (lines, bytes)}
    reader.check_deadline()

`conditions` (`LineConditions`) and `needles` are pushed down: every line they reject is one
the pipeline would reject, so storage may use them only to narrow what it returns. Here they
become SQL conditions on the head, Python tests on sealed rows and Bloom-filter checks that
skip whole sealed blocks (storage/sealed.py); a second backend may use them as it can, or not
at all. The deadline given at construction stops every statement (SQLite's progress handler)
and every batch: `QueryTimeout` is raised, whatever the stage.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from bisect import bisect_left
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol, Sequence

from logql.model import TS_MAX, TS_MIN
from storage import rollups, scan, sealed
from storage.scan import LineConditions, QueryTimeout, Row
from storage.sealed import Needle
from storage.streams import Matcher, TenantSet, select_stream_ids, stream_label_sets

MINUTE_NS = rollups.MINUTE_NS
# a query at the edge of time (a range before 1678) must not overflow SQLite's INTEGER; the
# low end is one below the earliest timestamp, as windows are left-open and (TS_MIN - 1, x]
# still holds a line at TS_MIN
_LO, _HI = TS_MIN - 1, TS_MAX


def _clamp(x: int) -> int:
    return _LO if x < _LO else _HI if x > _HI else x
# an unordered scan of more streams than this reads them all in one pass (scan_unordered):
# stream after stream, it was a statement per stream and window, which with thousands of
# small streams cost more than the rows
BY_STREAM_MAX = 64
# SQLite VM steps between two deadline checks inside one statement
_PROGRESS_STEPS = 20_000

# (stream id, metadata text) -> (lines per bucket, bytes per bucket)
Totals = dict[tuple[int, str], tuple[list[int], list[int]]]

__all__ = ["LogReader", "LineScan", "LineConditions", "QueryTimeout", "Row", "Totals",
           "ScanCounts"]


class ScanCounts(Protocol):
    """Where a scan adds what it examined (the query's stats object)."""
    lines_scanned: int
    bytes_scanned: int


class LogReader:
    """The SQLite implementation, over one reader connection."""

    # the rollups' minute: counts on whole minutes need no entry read
    count_granularity = MINUTE_NS

    def __init__(self, conn: sqlite3.Connection, deadline: float | None = None,
                 cutoff_of: Callable[[str, dict[str, str]], int | None] | None = None,
                 deletes_of: Callable[[str, dict[str, str]], list] | None = None):
        self.conn = conn
        self.deadline = deadline
        # set from another thread when the request that wanted this read went away: every
        # statement and every deadline check then ends the read as if its time were up
        self.cancelled = False
        # delete requests: (start, end, line predicate) per stream, by tenant and labels;
        # the lines they name are left out of every read until they are gone from disk
        self.deletes_of = deletes_of
        self.deletes: dict[int, list[tuple[int, int, Callable[[str], bool]]]] = {}
        # retention: the oldest visible timestamp of a stream, by tenant and labels; older
        # lines are left out of every read (storage/retention.py removes them from disk later)
        self.cutoff_of = cutoff_of
        self.cutoffs: dict[int, int] = {}

    # -- lifetime --------------------------------------------------------------------------
    @contextmanager
    def snapshot(self) -> Iterator["LogReader"]:
        """One read transaction around a whole evaluation (index, tail and scans see the
        same data); joins one the caller already opened. With a deadline, a statement still
        running past it is interrupted and the evaluation ends with QueryTimeout."""
        conn = self.conn
        owned = not conn.in_transaction
        if not owned:  # an outer snapshot holds the transaction and the deadline
            yield self
            return
        conn.execute("BEGIN")
        conn.set_progress_handler(self._past_deadline, _PROGRESS_STEPS)
        try:
            yield self
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc) and self._past_deadline():
                raise QueryTimeout() from None
            raise
        finally:
            conn.set_progress_handler(None, 0)
            if conn.in_transaction:
                conn.execute("COMMIT")

    def _past_deadline(self) -> bool:
        return self.cancelled or (self.deadline is not None
                                  and time.monotonic() > self.deadline)

    def check_deadline(self) -> None:
        if self._past_deadline():
            raise QueryTimeout()

    # -- streams ---------------------------------------------------------------------------
    def select_streams(self, tenant: str | TenantSet, matchers: Sequence[Matcher],
                       start: int, end: int) -> dict[int, dict[str, str]]:
        """Stream id -> labels (sorted by name), for streams matching every matcher with data
        overlapping [start, end]; ids ascending."""
        ids = select_stream_ids(self.conn, tenant, matchers, _clamp(start), _clamp(end))
        raw = stream_label_sets(self.conn, ids, tenant)
        # a stream's labels come sorted by name (its canonical text is); only the
        # `__tenant_id__` a multi-tenant read adds lands out of place
        out = raw if isinstance(tenant, str) else \
            {sid: dict(sorted(raw[sid].items())) for sid in ids}
        for sid, labels in out.items():
            own = tenant if isinstance(tenant, str) else labels.get("__tenant_id__", "")
            if self.cutoff_of is not None:
                cutoff = self.cutoff_of(own, labels)
                if cutoff is not None:
                    self.cutoffs[sid] = cutoff
            if self.deletes_of is not None:
                found = self.deletes_of(own, labels)
                if found:
                    self.deletes[sid] = found
        return out

    def visible_streams(self, tenant: str | TenantSet, groups: Sequence[Sequence[Matcher]],
                        start: int, end: int) -> dict[int, dict[str, str]]:
        """As select_streams for the union of matcher groups, without the streams that have
        no line left in [start, end] once retention and delete requests are applied (what
        labels and series answer)."""
        found: dict[int, dict[str, str]] = {}
        for group in groups or [()]:
            found.update(self.select_streams(tenant, group, start, end))
        for sid in list(found):
            hides = self.cutoffs.get(sid, start) > start or any(
                a <= end and b >= start for a, b, _ in self.deletes.get(sid, ()))
            # the first visible row settles it; an unordered, limited scan reads the least
            if hides and not any(self.lines([sid], start, end + 1, ordered=False,
                                            limited=True)):
                del found[sid]
        return dict(sorted(found.items()))

    # -- lines -----------------------------------------------------------------------------
    def lines(self, stream_ids: Sequence[int], start: int, end: int, *,
              conditions: LineConditions | None = None,
              needles: Sequence[Sequence[Needle]] = (), backward: bool = False,
              ordered: bool = True, limited: bool = False,
              counts: ScanCounts | None = None) -> "LineScan":
        """Rows of the streams with start <= ts < end, in batches: in time order
        (`ordered`, newest first if `backward`) or in no promised order (a few streams are
        read stream after stream, each oldest first; many in one pass). `limited`: the
        caller may stop early, so read the cheapest way to the first rows."""
        ids = list(stream_ids)
        start, end = _clamp(start), _clamp(end)
        cut = [self.cutoffs[i] for i in ids if i in self.cutoffs]
        if cut and len(cut) == len(ids):
            start = max(start, min(cut))
        return LineScan(self, ids, start, end, conditions, needles, backward, ordered, limited,
                        counts)

    # -- counts ----------------------------------------------------------------------------
    def window_counts(self, stream_ids: Sequence[int], points: list[int],
                      want_bytes: bool, left_closed: bool = False) -> Totals:
        """Lines and bytes of each (stream, metadata) in buckets (p[i], p[i+1]] (with
        `left_closed`: [p[i], p[i+1]) ), without reading lines: whole minutes from the
        rollups, the rest counted in SQLite. Left-closed buckets on whole minutes are the
        rollups' own and need nothing else."""
        nb = len(points) - 1
        if nb <= 0 or not stream_ids:
            return {}
        points = [_clamp(p) for p in points]
        aligned = all(p % MINUTE_NS == 0 for p in points)
        # [a, b) is (a - 1, b - 1] in integer nanoseconds
        shifted = [_clamp(p - 1) for p in points] if left_closed else points
        if left_closed and aligned:
            totals, add = _new_totals(nb)
            minute_ranges = [(points[i], points[i + 1]) for i in range(nb)]
            for sid, md, i, n, b in rollups.rollup_totals(self.conn, stream_ids,
                                                          minute_ranges):
                add(sid, md, i, n, b)
        else:
            totals = self._counts(stream_ids, shifted, want_bytes)
        if self.cutoffs:
            self._hide_expired(totals, shifted, want_bytes)
        if self.deletes:
            self._hide_deleted(totals, stream_ids, shifted)
        return totals

    def _counts(self, stream_ids: Sequence[int], points: list[int], want_bytes: bool) -> Totals:
        width = points[1] - points[0]
        even = all(b - a == width for a, b in zip(points, points[1:]))
        if even and width % MINUTE_NS == 0 and points[0] % MINUTE_NS == 0:
            return self._grid_counts(stream_ids, points, want_bytes)
        return self._edge_counts(stream_ids, points, want_bytes)

    def hidden_lines(self, stream_ids: Sequence[int], start: int,
                     end: int) -> Iterator[tuple[int, int, str]]:
        """(stream, ts, line) of the lines in [start, end] that pending delete requests or
        retention hide (what counts kept elsewhere, the patterns', must take out: expired
        lines stay in their counts until the compactor's sweep removes them)."""
        for sid in stream_ids:
            found = self.deletes.get(sid) or []
            cut = self.cutoffs.get(sid)
            spans = [(a, b) for a, b, _ in found]
            if cut is not None and cut > start:
                spans.append((start, cut - 1))  # older than the stream's retention cutoff
            if not spans:
                continue
            lo, hi = max(start, min(a for a, _ in spans)), min(end, max(b for _, b in spans))
            if lo > hi:
                continue
            blocks = sealed.SealedBlocks(self.conn, [sid], lo, hi + 1)
            for rows in scan.scan_by_stream(self.conn, [sid], lo, hi + 1,
                                            deadline=self.deadline, sealed=blocks):
                for _, _, ts, line, _ in rows:
                    if (cut is not None and ts < cut) or any(
                            a <= ts <= b and pick(line) for a, b, pick in found):
                        yield sid, ts, line

    def segments(self, stream_ids: Sequence[int], start: int, end: int) -> int:
        """How many storage segments hold the streams' data in [start, end]: sealed blocks,
        and each stream's head (what index/stats reports as chunks)."""
        return sealed.segment_count(self.conn, stream_ids, start, end)

    def _hide_deleted(self, totals: Totals, stream_ids: Sequence[int],
                      points: list[int]) -> None:
        """Take the lines delete requests name out of the counts: the streams' lines in the
        requests' ranges are read and each picked one is subtracted from its bucket."""
        for sid in stream_ids:
            found = self.deletes.get(sid)
            if not found:
                continue
            lo = max(points[0] + 1, min(f[0] for f in found), self.cutoffs.get(sid, 0))
            hi = min(points[-1], max(f[1] for f in found))
            if lo > hi:
                continue
            blocks = sealed.SealedBlocks(self.conn, [sid], lo, hi + 1)
            for rows in scan.scan_by_stream(self.conn, [sid], lo, hi + 1,
                                            deadline=self.deadline, sealed=blocks):
                for _, _, ts, line, md in rows:
                    if not any(a <= ts <= b and pick(line) for a, b, pick in found):
                        continue
                    t = totals.get((sid, md or ""))
                    if t is not None:
                        i = bisect_left(points, ts) - 1
                        t[0][i] -= 1
                        t[1][i] -= utf8_len(line)

    def _hide_expired(self, totals: Totals, points: list[int], want_bytes: bool) -> None:
        """Take the lines older than each stream's retention cutoff out of the counts:
        buckets wholly before it are emptied, the one it cuts loses the lines before it."""
        nb = len(points) - 1
        cut_buckets: dict[int, int] = {}
        for (sid, md), (lines, sizes) in totals.items():
            cutoff = self.cutoffs.get(sid)
            if cutoff is None or cutoff <= points[0] + 1:
                continue
            for i in range(nb):
                if points[i + 1] < cutoff:
                    lines[i] = sizes[i] = 0
                elif points[i] < cutoff - 1:
                    cut_buckets[sid] = i
        for sid, i in cut_buckets.items():
            edge = [(points[i], self.cutoffs[sid] - 1)]
            for _, md, _, n, b in _entry_totals(self.conn, [sid], edge, want_bytes):
                if (sid, md) in totals:
                    totals[(sid, md)][0][i] -= n
                    totals[(sid, md)][1][i] -= b

    def grouped_counts(self, group_of: dict[int, int], points: list[int],
                       want_bytes: bool) -> Totals:
        """As window_counts on an even, minute-aligned grid, summed per group of streams
        (`group_of`: stream id -> group number); keys are (group, "")."""
        nb = len(points) - 1
        totals, add = _new_totals(nb)
        if nb <= 0 or not group_of:
            return totals
        points = [_clamp(p) for p in points]
        if any(sid in self.cutoffs or sid in self.deletes for sid in group_of):
            # per stream (what retention or deletes hide is taken out there), then summed
            for (sid, _), (lines, sizes) in self.window_counts(list(group_of), points,
                                                               want_bytes).items():
                for i in range(nb):
                    add(group_of[sid], "", i, lines[i], sizes[i])
            return totals
        origin, width = points[0], points[1] - points[0]
        for grp, i, n, b in rollups.grouped_rollup_grid(self.conn, group_of, origin, width,
                                                         nb):
            add(grp, "", i, n, b)
        _move_edge_entries(self.conn, list(group_of), points, want_bytes,
                           lambda sid, md, i, n, b, sign=1: add(group_of[sid], "", i, n, b,
                                                                sign), nb)
        return totals

    def _grid_counts(self, sids: Sequence[int], points: list[int], want_bytes: bool) -> Totals:
        """Buckets of an evenly spaced, minute-aligned grid: rollup minutes by arithmetic,
        then the entries exactly on a grid point moved to the bucket they end."""
        nb = len(points) - 1
        totals, add = _new_totals(nb)
        origin, width = points[0], points[1] - points[0]
        for sid, md, i, n, b in rollups.rollup_grid(self.conn, sids, origin, width, nb):
            add(sid, md, i, n, b)
        _move_edge_entries(self.conn, sids, points, want_bytes, add, nb)
        return totals

    def _edge_counts(self, sids: Sequence[int], points: list[int], want_bytes: bool) -> Totals:
        """Buckets for arbitrary edges: whole minutes from the rollups, the partial minute
        before each edge from the entries (or every entry, when edges fall mid-minute so
        often that counting each entry once is cheaper)."""
        conn = self.conn
        nb = len(points) - 1
        totals, add = _new_totals(nb)
        span = points[-1] - points[0]
        partial = sum(x % MINUTE_NS for x in points)
        if partial * 2 > span:
            ranges = [(points[i], points[i + 1]) for i in range(nb)]
            for sid, md, i, n, b in _entry_totals(conn, sids, ranges, want_bytes):
                add(sid, md, i, n, b)
            return totals
        floors = [x - x % MINUTE_NS for x in points]
        minute_ranges = [(floors[i], floors[i + 1]) for i in range(nb)]
        for sid, md, i, n, b in rollups.rollup_totals(conn, sids, minute_ranges):
            add(sid, md, i, n, b)
        # entries with floor_minute(x) <= ts <= x sit in the rollups of the bucket x begins
        # but belong to the bucket x ends
        edges = [(f - 1, x) for f, x in zip(floors, points)]
        for sid, md, i, n, b in _entry_totals(conn, sids, edges, want_bytes):
            if i > 0:
                add(sid, md, i - 1, n, b)
            if i < nb:
                add(sid, md, i, n, b, -1)
        return totals


def _entry_totals(conn: sqlite3.Connection, sids: Sequence[int],
                  ranges: Sequence[tuple[int, int]], want_bytes: bool):
    """Entries with lo < ts <= hi per range, from the head and the sealed blocks."""
    return itertools.chain(rollups.entry_totals(conn, sids, ranges, with_bytes=want_bytes),
                           sealed.sealed_totals(conn, sids, ranges, with_bytes=want_bytes))


def _new_totals(nb: int):
    totals: Totals = {}

    def add(sid: Any, md: str, i: int, n: int, b: int, sign: int = 1) -> None:
        t = totals.get((sid, md))
        if t is None:
            t = totals[(sid, md)] = ([0] * nb, [0] * nb)
        t[0][i] += sign * n
        t[1][i] += sign * b
    return totals, add


def _move_edge_entries(conn: sqlite3.Connection, sids: Sequence[int], points: list[int],
                       want_bytes: bool, add: Any, nb: int) -> None:
    index = {x: i for i, x in enumerate(points)}
    at = itertools.chain(rollups.entries_at(conn, sids, points, with_bytes=want_bytes),
                         sealed.sealed_at(conn, sids, points, with_bytes=want_bytes))
    for sid, md, ts, n, b in at:
        i = index[ts]
        if i > 0:
            add(sid, md, i - 1, n, b)
        if i < nb:
            add(sid, md, i, n, b, -1)


class LineScan:
    """Row batches of one read, and what it examined (for the stats)."""

    def __init__(self, reader: LogReader, ids: list[int], start: int, end: int,
                 conditions: LineConditions | None, needles: Sequence, backward: bool,
                 ordered: bool, limited: bool, counts: ScanCounts | None):
        self.reader, self.ids, self.start, self.end = reader, ids, start, end
        self.conditions = conditions
        self.needles = [list(c) for c in needles]
        self.backward, self.ordered, self.limited = backward, ordered, limited
        self.counts = counts
        self._progress: scan.ScanProgress | None = None
        self._blocks: sealed.SealedBlocks | None = None

    def __iter__(self) -> Iterator[list[Row]]:
        return self.batches()

    def batches(self) -> Iterator[list[Row]]:
        """The head's rows come from SQL with the conditions inside SQLite; sealed blocks
        whose summaries rule out the needles and conditions are never decompressed."""
        conn, ids, deadline = self.reader.conn, self.ids, self.reader.deadline
        if not ids or self.start >= self.end:
            return
        cutoffs = {i: self.reader.cutoffs[i] for i in ids if i in self.reader.cutoffs}
        deleted = {i: self.reader.deletes[i] for i in ids if i in self.reader.deletes}
        if cutoffs or deleted:
            yield from _visible(self._batches(conn, ids, deadline), cutoffs, deleted)
        else:
            yield from self._batches(conn, ids, deadline)

    def _batches(self, conn: sqlite3.Connection, ids: list[int],
                 deadline: float | None) -> Iterator[list[Row]]:
        blocks = self._blocks = sealed.SealedBlocks(conn, ids, self.start, self.end,
                                                    conditions=self.conditions,
                                                    needles=self.needles)
        progress = self._progress = scan.ScanProgress()
        if self.ordered:
            yield from scan.scan_ordered(conn, ids, self.start, self.end,
                                         backward=self.backward, conditions=self.conditions,
                                         deadline=deadline, progress=progress, sealed=blocks)
            return
        progress.begin(self.start, self.end, False)
        if len(ids) > BY_STREAM_MAX:
            yield from scan.scan_unordered(conn, ids, self.start, self.end,
                                           conditions=self.conditions, deadline=deadline,
                                           sealed=blocks)
        else:
            yield from scan.scan_by_stream(conn, ids, self.start, self.end,
                                           conditions=self.conditions, deadline=deadline,
                                           sealed=blocks)
        progress.done(self.start, self.end)

    def finish(self) -> None:
        """Add what the scans covered to the counts (rows the conditions and the block
        summaries filtered out included)."""
        p, self._progress = self._progress, None
        if p is not None and p.lo < p.hi and self.counts is not None \
                and self._blocks is not None:
            # Loki counts every line of the chunks in range (a single binary has no bloom
            # gateway): so do we, the blocks the summaries skipped included
            lines, size = scan.range_counts(self.reader.conn, self.ids, p.lo, p.hi,
                                            self._blocks)
            self.counts.lines_scanned += lines
            self.counts.bytes_scanned += size


def _visible(batches: Iterator[list[Row]], cutoffs: dict[int, int],
             deleted: dict[int, list]) -> Iterator[list[Row]]:
    """Rows not older than their stream's retention cutoff and named by no delete request."""
    for rows in batches:
        kept = [r for r in rows if r[2] >= cutoffs.get(r[1], r[2])
                and not any(a <= r[2] <= b and pick(r[3])
                            for a, b, pick in deleted.get(r[1], ()))]
        if kept:
            yield kept


def utf8_len(line: str) -> int:
    return len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))
