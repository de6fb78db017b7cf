"""The SQLite implementation of the engine's `logql.reading.Reader`, over one reader connection.

The head's rows come from SQL with the line conditions inside SQLite, the sealed blocks'
(storage/blocks/sealed.py) through the same conditions in Python, skipping whole blocks whose
summaries and Bloom filters rule the needles out; counts are rollup arithmetic with exact
edge corrections from both. The deadline given at construction stops every statement
(SQLite's progress handler) and every batch: `QueryTimeout` is raised, whatever the stage.
What retention and delete requests hide is taken out by services/read/visibility.py, not here.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

from logql.errors import QueryTimeout
from logql.model import MINUTE_NS, TS_MAX, TS_MIN, Needle
from logql.reading import LineConditions, Row, ScanCounts, Totals, add_to_groups
from storage import columns, rollups, scan
from storage.blocks import counts, sealed
from storage.db import under_deadline
from storage.streams import (LabelSets, Matcher, TenantSet, select_stream_ids,
                             select_stream_texts, stream_label_sets, stream_label_values,
                             streams_meeting)

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
# the sealed rows the first window of a limited read takes (Grafana asks for 1000 lines)
LIMITED_FIRST_ROWS = 1000
# up to this many count edges, the streams without data at any are left out of the edge reads
EDGE_FILTER_MAX = 16

__all__ = ["LogReader", "LineScan"]


class LogReader:
    """The SQLite implementation, over one reader connection."""

    # the rollups' minute: counts on whole minutes need no entry read
    count_granularity = MINUTE_NS

    def __init__(self, conn: sqlite3.Connection, deadline: float | None = None):
        self.conn = conn
        self.deadline = deadline
        # set from another thread when the request that wanted this read went away: every
        # statement and every deadline check then ends the read as if its time were up
        self.cancelled = False

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
        with under_deadline(conn, self._past_deadline):
            yield self

    def _past_deadline(self) -> bool:
        return self.cancelled or (self.deadline is not None
                                  and time.monotonic() > self.deadline)

    def check_deadline(self) -> None:
        if self._past_deadline():
            raise QueryTimeout()

    # -- streams ---------------------------------------------------------------------------
    def select_streams(self, tenant: str | TenantSet, matchers: Sequence[Matcher],
                       start: int, end: int) -> Mapping[int, dict[str, str]]:
        """Stream id -> labels (sorted by name), for streams matching every matcher with data
        overlapping [start, end]; ids ascending."""
        if isinstance(tenant, str):
            # a stream's labels come sorted by name (its canonical text is), each parsed
            # when first asked for
            return LabelSets(select_stream_texts(self.conn, tenant, matchers, _clamp(start),
                                                 _clamp(end)))
        ids = self.select_stream_ids(tenant, matchers, start, end)
        # only the `__tenant_id__` a multi-tenant read adds lands out of place
        raw = stream_label_sets(self.conn, ids, tenant)
        return {sid: dict(sorted(raw[sid].items())) for sid in ids}

    def select_stream_ids(self, tenant: str | TenantSet, matchers: Sequence[Matcher],
                          start: int, end: int) -> list[int]:
        """The ids of select_streams, without their labels."""
        return select_stream_ids(self.conn, tenant, matchers, _clamp(start), _clamp(end))

    def select_stream_groups(self, tenant: str | TenantSet, matchers: Sequence[Matcher],
                             start: int, end: int, names: Sequence[str]
                             ) -> dict[int, tuple[str | None, ...]]:
        """The streams of select_streams with only their values of `names`."""
        ids = self.select_stream_ids(tenant, matchers, start, end)
        return stream_label_values(self.conn, ids, tenant, names)

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
        return LineScan(self, list(stream_ids), _clamp(start), _clamp(end), conditions,
                        needles, backward, ordered, limited, counts)

    def line_columns(self, stream_ids: Sequence[int], start: int, end: int):
        """Rows of the streams with start <= ts < end: the head's as row batches, each
        sealed block's as one LineColumns (storage/columns.py)."""
        return columns.line_columns(self.conn, list(stream_ids), _clamp(start), _clamp(end),
                                    self.deadline)

    # -- counts ----------------------------------------------------------------------------
    def window_counts(self, stream_ids: Sequence[int], points: list[int],
                      want_bytes: bool) -> Totals:
        """Lines and bytes of each (stream, metadata) in buckets (p[i], p[i+1]], without
        reading lines: whole minutes from the rollups, the rest counted in SQLite."""
        nb = len(points) - 1
        if nb <= 0 or not stream_ids:
            return {}
        points = [_clamp(p) for p in points]
        if all((p + 1) % MINUTE_NS == 0 for p in points):
            # (m - 1, m' - 1] is [m, m'): the rollups' own buckets (volume's), nothing else
            minute_ranges = [(points[i] + 1, points[i + 1] + 1) for i in range(nb)]
            return _fill_totals(rollups.rollup_totals(self.conn, stream_ids, minute_ranges),
                                nb)
        return self._counts(stream_ids, points, want_bytes)

    def _counts(self, stream_ids: Sequence[int], points: list[int], want_bytes: bool) -> Totals:
        width = points[1] - points[0]
        even = all(b - a == width for a, b in zip(points, points[1:]))
        if even and width % MINUTE_NS == 0 and points[0] % MINUTE_NS == 0:
            return self._grid_counts(stream_ids, points, want_bytes)
        return self._edge_counts(stream_ids, points, want_bytes)

    def segments(self, stream_ids: Sequence[int], start: int, end: int) -> int:
        """How many storage segments hold the streams' data in [start, end]: sealed blocks,
        and each stream's head (what index/stats reports as chunks)."""
        return counts.segment_count(self.conn, stream_ids, start, end)

    def grouped_counts(self, group_of: dict[int, int], points: list[int],
                       want_bytes: bool) -> Totals:
        """As window_counts summed per group of streams (`group_of`: stream id -> group
        number); keys are (group, ""). SQLite does the summing on volume's buckets (each
        point a minute less 1 ns) and on an even, minute-aligned grid."""
        nb = len(points) - 1
        if nb <= 0 or not group_of:
            return {}
        points = [_clamp(p) for p in points]
        if all((p + 1) % MINUTE_NS == 0 for p in points):
            minute_ranges = [(points[i] + 1, points[i + 1] + 1) for i in range(nb)]
            rows = rollups.grouped_rollup_totals(self.conn, group_of, minute_ranges)
            return _group_totals(rows, nb)
        origin, width = points[0], points[1] - points[0]
        if any(b - a != width for a, b in zip(points, points[1:])) or \
                width % MINUTE_NS or origin % MINUTE_NS:
            # not a shape the rollups sum per group: per stream, then summed
            return add_to_groups({}, self.window_counts(list(group_of), points, want_bytes),
                                 group_of, nb)
        totals = _group_totals(rollups.grouped_rollup_grid(self.conn, group_of, origin,
                                                           width, nb), nb)
        _, add = _new_totals(nb, totals)
        _move_edge_entries(self.conn, list(group_of), points, want_bytes,
                           lambda sid, md, i, n, b, sign=1: add(group_of[sid], "", i, n, b,
                                                                sign), nb)
        return totals

    def _grid_counts(self, sids: Sequence[int], points: list[int], want_bytes: bool) -> Totals:
        """Buckets of an evenly spaced, minute-aligned grid: rollup minutes by arithmetic,
        then the entries exactly on a grid point moved to the bucket they end."""
        nb = len(points) - 1
        origin, width = points[0], points[1] - points[0]
        totals = _fill_totals(rollups.rollup_grid(self.conn, sids, origin, width, nb), nb)
        _, add = _new_totals(nb, totals)
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
        totals = _fill_totals(rollups.rollup_totals(conn, sids, minute_ranges), nb)
        _, add = _new_totals(nb, totals)
        # entries with floor_minute(x) <= ts <= x sit in the rollups of the bucket x begins
        # but belong to the bucket x ends
        edges = [(f - 1, x) for f, x in zip(floors, points)]
        if len(edges) <= EDGE_FILTER_MAX:
            # a few edges (an instant query's two): only streams with data at one of them
            # are read there, often none (20,000 streams, instant rate [1h]: -100 ms)
            sids = streams_meeting(conn, sids, edges)
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
                           counts.sealed_totals(conn, sids, ranges, with_bytes=want_bytes))


def _group_totals(rows: Iterator[tuple[int, int, int, int]], nb: int) -> Totals:
    """Totals keyed (group, "") from `(group, bucket, lines, bytes)` rows, one per pair."""
    return _fill_totals(((grp, "", i, n, b) for grp, i, n, b in rows), nb)


def _fill_totals(rows: Iterator[tuple[int, str, int, int, int]], nb: int) -> Totals:
    """Totals from `(stream, metadata, bucket, lines, bytes)` rows, one per triple (a GROUP
    BY's): set, not added, with no call per row."""
    totals: Totals = {}
    for sid, md, i, n, b in rows:
        t = totals.get((sid, md))
        if t is None:
            t = totals[(sid, md)] = ([0] * nb, [0] * nb)
        t[0][i] = n
        t[1][i] = b
    return totals


def _new_totals(nb: int, totals: Totals | None = None):
    totals = {} if totals is None else totals

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
                         counts.sealed_at(conn, sids, points, with_bytes=want_bytes))
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
        blocks = self._blocks = sealed.SealedBlocks(conn, ids, self.start, self.end,
                                                    conditions=self.conditions,
                                                    needles=self.needles)
        progress = self._progress = scan.ScanProgress()
        if self.ordered:
            yield from scan.scan_ordered(conn, ids, self.start, self.end,
                                         backward=self.backward, conditions=self.conditions,
                                         deadline=deadline, progress=progress, sealed=blocks,
                                         first_rows=LIMITED_FIRST_ROWS if self.limited else 0)
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
                                            self._blocks, p.head_totals)
            self.counts.lines_scanned += lines
            self.counts.bytes_scanned += size

