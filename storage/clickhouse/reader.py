"""The ClickHouse implementation of the engine's `logql.reading.Reader`.

Stream selection reads the stream index (storage/clickhouse/index.py); lines come from
`entries` with the line conditions rendered as ClickHouse string functions, in `(ts, seq)`
order page by page; counts come from the per-minute rollups where the buckets allow
(storage/clickhouse/rollups.py), else `count()` and `sum(bytes)` per bucket over the entries
(the ordering key starts with tenant and stream, so a read touches only the granules of the
streams asked for). What retention and delete requests
hide is taken out by services/read/visibility.py, over this as over SQLite.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from logql.errors import QueryTimeout, StoreUnavailable
from logql.model import TS_MAX, TS_MIN
from logql.reading import (LineColumns, LineConditions, Row, ScanCounts, Totals, add_to_groups,
                           ci_testable)
from storage.clickhouse import rollups
from storage.clickhouse.index import StreamIndex
from storage.streams import Matcher, TenantSet

_LO, _HI = TS_MIN - 1, TS_MAX
# rows per page of an ordered read; a limited read's first page is small (Grafana asks for
# 1000 lines, and most of a page past the limit would be read for nothing)
PAGE_ROWS = 20_000
LIMITED_FIRST_ROWS = 1000
HOUR_NS = 3600 * 10**9
# a scan in the table's own order, stream after stream: the ORDER BY and the keyset
# condition that starts a page after the last row of the one before
_STREAM_ORDER = ("stream_id, ts, seq",
                 "(stream_id, ts, seq) > ({asid:UInt64}, {at:Int64}, {aseq:UInt64})")


def _clamp(x: int) -> int:
    return _LO if x < _LO else _HI if x > _HI else x


def conditions_sql(conditions: LineConditions | None) -> tuple[str, dict[str, Any]]:
    """(` AND ...` fragment, parameters) rejecting only what `conditions.matcher()`
    rejects: `position` for a needle, the ASCII-folding `positionCaseInsensitive` for a
    case-insensitive one that `ci_testable` allows."""
    if conditions is None:
        return "", {}
    parts: list[str] = []
    params: dict[str, Any] = {}

    def param(value: str) -> str:
        name = f"c{len(params)}"
        params[name] = value
        return "{" + name + ":String}"

    for clause in conditions.all_of:
        alts = []
        for text, ci in clause:
            if not ci:
                alts.append(f"position(line, {param(text)}) > 0")
            elif ci_testable(text):
                alts.append(f"positionCaseInsensitive(line, {param(text)}) > 0")
            else:
                alts = []
                break
        if alts:
            parts.append("(" + " OR ".join(alts) + ")")
    for text in conditions.none_of:
        parts.append(f"position(line, {param(text)}) = 0")
    for name, value in conditions.label_values:
        parts.append(f"(position(line, {param(value)}) > 0 OR position(line, '\\\\') > 0 "
                     f"OR position(metadata, {param(chr(34) + name + chr(34) + ':')}) > 0)")
    if not parts:
        return "", {}
    return " AND " + " AND ".join(parts), params


def _per_stream(table: Any) -> Iterator[LineColumns]:
    """One LineColumns per stream of a page sorted by stream."""
    sids = table.column("stream_id").to_numpy()
    ts = table.column("ts").to_numpy()
    seq = table.column("seq").to_numpy().astype(np.int64)
    lines = table.column("line").combine_chunks()
    # String comes as Arrow string or binary (32-bit offsets), or their large forms
    width = 8 if str(lines.type).startswith("large_") else 4
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64 if width == 8 else np.int32,
                            count=len(lines) + 1, offset=lines.offset * width
                            ).astype(np.int64)
    data = lines.buffers()[2].to_pybytes() if lines.buffers()[2] is not None else b""
    mds = table.column("metadata").to_pylist()
    cuts = [0, *(np.flatnonzero(np.diff(sids)) + 1).tolist(), len(sids)]
    for a, b in zip(cuts, cuts[1:]):
        texts: dict[str, int] = {}
        md = np.array([-1 if not m else texts.setdefault(m, len(texts)) for m in mds[a:b]],
                      dtype=np.int32)
        lo, hi = int(offsets[a]), int(offsets[b])
        yield LineColumns(int(sids[a]), ts[a:b], seq[a:b], data[lo:hi],
                          offsets[a:b + 1] - lo, md, list(texts))


class _Bounded:
    """The client under the read's deadline: every statement carries the time left as its
    `max_execution_time`, so ClickHouse stops a statement that would run past it, and a
    statement it stopped so is the read's QueryTimeout (504), not a store failure."""

    def __init__(self, client: Any, reader: "ClickHouseReader"):
        self.client, self.reader = client, reader

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        return self._bounded(self.client.query, sql, params)

    def query_arrow(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        return self._bounded(self.client.query_arrow, sql, params)

    def _bounded(self, run: Any, sql: str, params: dict[str, Any] | None) -> Any:
        self.reader.check_deadline()
        deadline = self.reader.deadline
        settings = None if deadline is None else \
            {"max_execution_time": max(1, math.ceil(deadline - time.monotonic()))}
        try:
            return run(sql, params, settings)
        except StoreUnavailable as exc:
            if "TIMEOUT_EXCEEDED" in str(exc):
                raise QueryTimeout() from None
            raise


class ClickHouseReader:
    """A `Reader` over one ClickHouse database, under an optional deadline."""

    # counts are exact at any point (the entries are counted where the rollups' minutes do
    # not answer), so the engine's grids are never widened to minutes for this reader
    count_granularity = 1

    def __init__(self, client: Any, db: str, deadline: float | None = None):
        self.client, self.db, self.deadline = _Bounded(client, self), db, deadline
        self.index = StreamIndex(self.client, db)
        self.cancelled = False
        # the tenant of every stream this reader handed out: the entries' ordering key
        # starts with the tenant
        self._tenant_of: dict[int, str] = {}

    # -- lifetime --------------------------------------------------------------------------
    @contextmanager
    def snapshot(self) -> Iterator["ClickHouseReader"]:
        # ClickHouse has no read transactions: each statement sees the data of its moment
        yield self

    def check_deadline(self) -> None:
        if self.cancelled or (self.deadline is not None and time.monotonic() > self.deadline):
            raise QueryTimeout()

    # -- streams ---------------------------------------------------------------------------
    def select_streams(self, tenant: str | TenantSet, matchers: Sequence[Matcher],
                       start: int, end: int) -> Mapping[int, dict[str, str]]:
        self.check_deadline()
        found = self.index.select_streams(tenant, matchers, _clamp(start), _clamp(end))
        for sid, labels in found.items():
            self._tenant_of[sid] = labels.get("__tenant_id__", tenant) \
                if isinstance(tenant, TenantSet) else tenant
        return found

    def select_stream_ids(self, tenant: str | TenantSet, matchers: Sequence[Matcher],
                          start: int, end: int) -> list[int]:
        return list(self.select_streams(tenant, matchers, start, end))

    def select_stream_groups(self, tenant: str | TenantSet, matchers: Sequence[Matcher],
                             start: int, end: int, names: Sequence[str]
                             ) -> dict[int, tuple[str | None, ...]]:
        return {sid: tuple(labels.get(n) for n in names)
                for sid, labels in self.select_streams(tenant, matchers, start, end).items()}

    def _by_tenant(self, ids: Sequence[int]) -> dict[str | None, list[int]]:
        out: dict[str | None, list[int]] = {}
        for sid in ids:
            out.setdefault(self._tenant_of.get(sid), []).append(sid)
        return out

    def _where(self, tenant: str | None, ids: list[int]) -> tuple[str, dict[str, Any]]:
        if tenant is None:
            return "stream_id IN {ids:Array(UInt64)}", {"ids": sorted(ids)}
        return ("tenant = {t:String} AND stream_id IN {ids:Array(UInt64)}",
                {"t": tenant, "ids": sorted(ids)})

    # -- lines -----------------------------------------------------------------------------
    def lines(self, stream_ids: Sequence[int], start: int, end: int, *,
              conditions: LineConditions | None = None, needles: Sequence = (),
              backward: bool = False, ordered: bool = True, limited: bool = False,
              counts: ScanCounts | None = None) -> "ClickHouseScan":
        return ClickHouseScan(self, list(stream_ids), _clamp(start), _clamp(end),
                              conditions, backward, limited, counts, ordered)

    def line_columns(self, stream_ids: Sequence[int], start: int, end: int
                     ) -> Iterator[LineColumns]:
        """Pages of rows in (stream, ts, seq) order as Arrow columns, each page cut into one
        LineColumns per stream: the lines stay one buffer with offsets, as ClickHouse
        sends them, with no Python object per row."""
        start, end = _clamp(start), _clamp(end)
        if not stream_ids or start >= end:
            return
        for tenant, ids in self._by_tenant(stream_ids).items():
            for table in self.pages(
                    "stream_id, ts, seq, line, metadata", self._where(tenant, ids), ("", {}),
                    *_STREAM_ORDER, lambda t: {"asid": t.column("stream_id")[-1].as_py(),
                                               "at": t.column("ts")[-1].as_py(),
                                               "aseq": t.column("seq")[-1].as_py()},
                    PAGE_ROWS, start, end, arrow=True):
                yield from _per_stream(table)

    def pages(self, columns: str, where: tuple[str, dict[str, Any]],
              conditions: tuple[str, dict[str, Any]], order: str, after: str,
              cursor_of: Any, first: int, lo: int, hi: int, arrow: bool = False
              ) -> Iterator[Any]:
        """`columns` of the rows with lo <= ts < hi in `order`, page after page (lists of
        rows, or Arrow tables): each statement starts after the last row of the one before
        (`after`, filled by `cursor_of(page)`), so no page is read twice, however deep the
        scan goes. The first page holds `first` rows, the others PAGE_ROWS."""
        clause, params = where
        cond, cparams = conditions
        fetch = self.client.query_arrow if arrow else self.client.query
        page, cursor = first, None
        while True:
            self.check_deadline()
            sql = (f"SELECT {columns} FROM {self.db}.entries "
                   f"WHERE {clause} AND ts >= {{s:Int64}} AND ts < {{e:Int64}}{cond}")
            if cursor is not None:
                sql += " AND " + after
            got = fetch(sql + f" ORDER BY {order} LIMIT {page}",
                        {**params, **cparams, **(cursor or {}), "s": lo, "e": hi})
            if len(got):
                cursor = cursor_of(got)
                yield got
            if len(got) < page:
                return
            page = PAGE_ROWS

    # -- counts ----------------------------------------------------------------------------
    def window_counts(self, stream_ids: Sequence[int], points: list[int],
                      want_bytes: bool) -> Totals:
        nb = len(points) - 1
        if nb <= 0 or not stream_ids:
            return {}
        points = [_clamp(p) for p in points]
        plan = rollups.plan(points)
        if plan is not None:
            return rollups.totals(self.client, self.db, self._where,
                                  self._by_tenant(stream_ids), plan, None)
        width = points[1] - points[0]
        index_of: dict[int, int] | None = None
        if all(b - a == width for a, b in zip(points, points[1:])):
            bucket, extra = "intDiv(ts - {p0:Int64} - 1, {w:Int64})", {"w": width}
        else:
            # the bucket (p[i], p[i+1]] of ts is named by p[i], the point ts - 1 rounds
            # down to: a binary search per row (arrayFirstIndex, linear, took 20 times as
            # long over 500 points)
            bucket, extra = "roundDown(ts - 1, {pts:Array(Int64)})", {"pts": points}
            index_of = {p: i for i, p in enumerate(points)}
        totals: Totals = {}
        for tenant, ids in self._by_tenant(stream_ids).items():
            self.check_deadline()
            where, params = self._where(tenant, ids)
            rows = self.client.query(
                f"SELECT stream_id, metadata, {bucket} AS b, count(), sum(bytes) "
                f"FROM {self.db}.entries WHERE {where} AND ts > {{p0:Int64}} "
                "AND ts <= {pn:Int64} GROUP BY stream_id, metadata, b",
                {**params, **extra, "p0": points[0], "pn": points[-1]})
            for sid, md, b, n, size in rows:
                if index_of is not None:
                    b = index_of[b]
                acc = totals.get((sid, md))
                if acc is None:
                    acc = totals[(sid, md)] = ([0] * nb, [0] * nb)
                acc[0][b] += n
                acc[1][b] += size
        return totals

    def grouped_counts(self, group_of: dict[int, int], points: list[int],
                       want_bytes: bool) -> Totals:
        nb = len(points) - 1
        if nb <= 0 or not group_of:
            return {}
        plan = rollups.plan([_clamp(p) for p in points])
        if plan is not None:
            return rollups.totals(self.client, self.db, self._where,
                                  self._by_tenant(list(group_of)), plan, group_of)
        return add_to_groups({}, self.window_counts(list(group_of), points, want_bytes),
                             group_of, nb)

    def segments(self, stream_ids: Sequence[int], start: int, end: int) -> int:
        """index/stats' chunks: each stream's hours (storage.block_window's default) with
        data in [start, end]."""
        total = 0
        for tenant, ids in self._by_tenant(stream_ids).items():
            where, params = self._where(tenant, ids)
            sql, bounds = rollups.hours_sql(self.db, where, _clamp(start), _clamp(end))
            rows = self.client.query(sql, {**params, **bounds})
            total += rows[0][0] if rows else 0
        return total

    def range_totals(self, stream_ids: Sequence[int], lo: int, hi: int) -> tuple[int, int]:
        """Lines and UTF-8 bytes of the streams with `lo <= ts < hi`."""
        lines = size = 0
        if lo >= hi:
            return 0, 0
        for tenant, ids in self._by_tenant(stream_ids).items():
            where, params = self._where(tenant, ids)
            (n, b), = self.client.query(
                f"SELECT count(), sum(bytes) FROM {self.db}.entries WHERE {where} "
                "AND ts >= {lo:Int64} AND ts < {hi:Int64}", {**params, "lo": lo, "hi": hi})
            lines, size = lines + n, size + b
        return lines, size


class ClickHouseScan:
    """Pages of `(seq, stream id, ts, line, metadata)` in `(ts, seq)` order, or when not
    `ordered` stream after stream (the table's own order, read without a sort)."""

    def __init__(self, reader: ClickHouseReader, ids: list[int], start: int, end: int,
                 conditions: LineConditions | None, backward: bool, limited: bool,
                 counts: ScanCounts | None, ordered: bool = True):
        self.ordered = ordered
        self.reader, self.ids, self.start, self.end = reader, ids, start, end
        self.conditions, self.backward, self.limited = conditions, backward, limited
        self.counts = counts
        self._conditions = conditions_sql(conditions)
        self._walked: tuple[int, int] | None = None  # [lo, hi) the pages covered

    def __iter__(self) -> Iterator[list[Row]]:
        return self.batches()

    def batches(self) -> Iterator[list[Row]]:
        if not self.ids or self.start >= self.end:
            return
        r = self.reader
        if not self.ordered:
            self._walked = (self.start, self.end)
            for tenant, ids in r._by_tenant(self.ids).items():
                yield from self._pages(
                    r._where(tenant, ids), *_STREAM_ORDER,
                    lambda rows: {"asid": rows[-1][1], "at": rows[-1][2],
                                  "aseq": rows[-1][0]}, PAGE_ROWS)
            return
        order = "DESC" if self.backward else "ASC"
        sign = "<" if self.backward else ">"
        groups = list(r._by_tenant(self.ids).items())
        # one tenant at a time would break the order across tenants: the tenants' streams
        # go in one statement when there are several
        where = r._where(*groups[0]) if len(groups) == 1 else r._where(None, self.ids)
        self._walked = (self.end, self.end) if self.backward else (self.start, self.start)
        first = LIMITED_FIRST_ROWS if self.limited else PAGE_ROWS
        for lo, hi in self._windows(where, first):
            for rows in self._pages(
                    where, f"ts {order}, seq {order}",
                    f"(ts {sign} {{at:Int64}} OR (ts = {{at:Int64}} AND seq {sign} "
                    "{aseq:UInt64}))",
                    lambda rows: {"at": rows[-1][2], "aseq": rows[-1][0]}, first, lo, hi):
                first = PAGE_ROWS
                last = rows[-1][2]
                self._walked = (last, self.end) if self.backward else (self.start, last + 1)
                yield rows
        self._walked = (self.start, self.end)

    def _windows(self, where: tuple[str, dict[str, Any]], first: int
                 ) -> Iterator[tuple[int, int]]:
        """[lo, hi) parts of the range, from the end the scan starts at, each holding about
        a page of rows: a read sorts only the rows of its part, where one ORDER BY over a
        day sorted the whole day to return its first thousand lines. The parts come from a
        count of the rows per hour, which reads the timestamps alone; with line conditions
        that count would read the lines, so the range is one part then."""
        if not self.limited or self._conditions[0]:
            yield self.start, self.end
            return
        clause, params = where
        counts = self.reader.client.query(
            f"SELECT intDiv(ts, {HOUR_NS}) AS h, count() FROM {self.reader.db}.entries "
            f"WHERE {clause} AND ts >= {{s:Int64}} AND ts < {{e:Int64}} GROUP BY h "
            f"ORDER BY h {'DESC' if self.backward else 'ASC'}",
            {**params, "s": self.start, "e": self.end})
        edge, want, held = (self.end if self.backward else self.start), first, 0
        for h, n in counts:
            held += n
            if held < want:
                continue
            # the part ends with hour h (clamped to the range)
            if self.backward:
                lo = max(self.start, h * HOUR_NS)
                yield lo, edge
                edge = lo
            else:
                hi = min(self.end, (h + 1) * HOUR_NS)
                yield edge, hi
                edge = hi
            held, want = 0, PAGE_ROWS
        if self.backward and edge > self.start:
            yield self.start, edge
        elif not self.backward and edge < self.end:
            yield edge, self.end

    def _pages(self, where: tuple[str, dict[str, Any]], order: str, after: str,
               cursor_of: Any, first: int, lo: int | None = None,
               hi: int | None = None) -> Iterator[list[Row]]:
        """The scan's rows in `order`, page after page (ClickHouseReader.pages)."""
        for rows in self.reader.pages(
                "seq, stream_id, ts, line, metadata", where, self._conditions, order, after,
                cursor_of, first, self.start if lo is None else lo,
                self.end if hi is None else hi):
            yield [(seq, sid, ts, line, md or None) for seq, sid, ts, line, md in rows]

    def finish(self) -> None:
        walked, self._walked = self._walked, None
        if walked is None or self.counts is None:
            return
        lines, size = self.reader.range_totals(self.ids, *walked)
        self.counts.lines_scanned += lines
        self.counts.bytes_scanned += size
