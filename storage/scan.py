"""SQL scans of log entries for the query engine: by stream ids and time range, in batches,
newest-first or oldest-first, with optional exact-superset line conditions evaluated inside
SQLite.

Rows are `(id, stream_id, ts, line, metadata)`; `metadata` is the stored JSON text or None.

Ordered scans walk the time range in windows that grow while they return few rows and shrink
when they return many: a query that stops after `limit` entries touches only the newest (or
oldest) few windows, and each window's ORDER BY sorts only that window's rows. Stream ids go
in as one JSON array parameter (`json_each`), so any number of streams needs one placeholder;
a statement over the whole range takes them as a few ranges of ids when they are
(`storage.stream_set`).

Line conditions (`LineConditions`) are derived by the planner from the leading line filters:
every line they reject is one the pipeline would reject too, so they may only narrow the scan;
the pipeline still checks every row it receives. They run in C inside SQLite, which makes a
rare-needle scan several times faster than shipping every line to Python.
"""

from __future__ import annotations

import json
import sqlite3
import time
from bisect import bisect_left
from operator import itemgetter
from typing import Iterator, Sequence

from logql.errors import QueryTimeout
from logql.reading import LineConditions, Row, ci_testable
from storage.blocks.sealed import SealedBlocks
from storage.entries import newest_head_id
from storage.second_reader import head_state, second_reader
from storage.stream_set import stream_condition

FIRST_WINDOW_NS = 60 * 10**9
TARGET_ROWS = 4000
# rows one window may bring into memory: a first window over dense data (a minute of
# thousands of lines a second) is cut to this many before anything is read
WINDOW_MAX_ROWS = 4 * TARGET_ROWS


MAX_SQL_ALTERNATIVES = 64
MAX_SQL_TERMS = 64


def _first_terms(parts: list[str], params: list) -> tuple[list[str], list]:
    if len(parts) <= MAX_SQL_TERMS:
        return parts, params
    kept = parts[:MAX_SQL_TERMS]
    return kept, params[:sum(p.count("?") for p in kept)]


def conditions_sql(conditions: LineConditions | None) -> tuple[str, list]:
    """(` AND ...` fragment, parameters) testing the line conditions on `entries`; empty
    when nothing applies. It rejects exactly what `conditions.matcher()` rejects (the sealed
    rows' test), except for terms beyond SQLite's expression bounds, which are left out."""
    if conditions is None:
        return "", []
    parts: list[str] = []
    params: list = []
    for clause in conditions.all_of:
        if len(clause) > MAX_SQL_ALTERNATIVES:
            continue  # SQLite's expression depth is bounded: this one is left to Python
        alts: list[str] = []
        alt_params: list = []
        for text, ci in clause:
            if not ci:
                alts.append("instr(line, ?) > 0")
                alt_params.append(text)
            elif ci_testable(text):
                alts.append("line LIKE ? ESCAPE '\\'")
                alt_params.append("%" + _like_escape(text) + "%")
            else:
                alts = []  # one untestable alternative makes the whole OR untestable
                break
        if alts:
            parts.append("(" + " OR ".join(alts) + ")" if len(alts) > 1 else alts[0])
            params.extend(alt_params)
    for text in conditions.none_of:
        parts.append("instr(line, ?) = 0")
        params.append(text)
    for name, value in conditions.label_values:
        # metadata is compact JSON written by the ingester: a key reads "name":
        parts.append("(instr(line, ?) > 0 OR instr(line, '\\') > 0 "
                     "OR instr(coalesce(metadata, ''), ?) > 0)")
        params.extend((value, f'"{name}":'))
    # SQLite nests an AND chain one level per term, up to 1000: a query of 2000 line
    # filters keeps the first ones in SQL and leaves the rest to the pipeline
    parts, params = _first_terms(parts, params)
    if not parts:
        return "", []
    return " AND " + " AND ".join(parts), params


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _ids_param(stream_ids: Sequence[int]) -> str:
    return json.dumps(list(stream_ids))


_SELECT_WHERE = ("SELECT id, stream_id, ts, line, metadata FROM entries "
                 "WHERE {streams} AND ts >= ? AND ts < ?")
_SELECT = _SELECT_WHERE.format(streams="stream_id IN (SELECT value FROM json_each(?))")


def scan_ordered(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int, end: int, *,
                 backward: bool, conditions: LineConditions | None = None,
                 deadline: float | None = None, target_rows: int = TARGET_ROWS,
                 progress: "ScanProgress | None" = None, max_windows: int | None = None,
                 sealed: "SealedBlocks | None" = None,
                 only_stream: int | None = None, first_rows: int = 0) -> Iterator[list[Row]]:
    """Batches of rows with `start <= ts < end`, in global `ts` order (ties by id), newest
    first when `backward`, from the head (`entries`) and from `sealed` blocks together. Stop
    iterating whenever you have enough: nothing further is read.

    `progress`, if given, records the part of [start, end) that has been read (so the caller
    can count what was examined, see `range_counts`) and the current window width; a scan
    given the same progress continues where the previous one left off. `max_windows` ends
    the scan early, after that many windows. `only_stream`: of the sealed blocks, read only
    this stream's (the head query already has just `stream_ids`). `first_rows`: the first
    window with rows takes about this many sealed rows, each next one 4x more up to
    `target_rows`: a limited read that stops at its limit decodes few rows (thousands of
    quiet streams' last lines in one instant), one whose pipeline drops most rows soon
    reads whole windows."""
    if not stream_ids or start >= end:
        return
    where, cond_params = conditions_sql(conditions)
    order = " ORDER BY ts DESC, id DESC" if backward else " ORDER BY ts, id"
    sql = _SELECT + where + order
    ids = _ids_param(stream_ids)
    if progress is None:
        progress = ScanProgress()
    if progress.width == 0:
        progress.begin(start, end, backward)
    width = progress.width
    lo, hi = (start, progress.lo) if backward else (progress.hi, end)
    windows = 0
    cap = min(first_rows, target_rows) if first_rows > 0 else target_rows
    # the head's rows a window may take, as the sealed cap from first_rows but growing to
    # WINDOW_MAX_ROWS: a statement over thousands of streams sorts every row of its window
    # to return the first, and 16,001 of 20,000 pods' newest rows for a limit of 100 took
    # 91 ms where 1,001 took 23
    head_cap = min(first_rows, WINDOW_MAX_ROWS) if first_rows > 0 else WINDOW_MAX_ROWS
    # a store at rest has sealed everything: one look spares a statement per window, each
    # of which reads the ids of every stream (thousands) again. Reads run in a snapshot
    # (LogReader.snapshot), so the head cannot change under the scan
    held = None
    if sealed is not None and where and lo < hi and len(stream_ids) >= WHOLE_RANGE_STREAMS:
        whole = stream_condition(stream_ids, listed=ids)
        if sealed.mostly_ruled_out() or (not sealed.judges_rarity() and _rare_in_sample(
                conn, where, whole, lo, hi, cond_params)):
            # a rare needle by the sealed blocks' Bloom filters, or by a sample of the head
            # when too few blocks can tell: the one pass over the head that finds its rows
            # also counts what the stats report
            held, totals = _tallied_rows(conn, where, stream_ids, whole, lo, hi,
                                         cond_params, deadline)
            progress.head_totals = (lo, hi, *totals)
        else:
            held = _held_rows(conn, where, whole, lo, hi, cond_params)
    head = held is None and (sealed is None or lo >= hi or conn.execute(
        "SELECT 1 FROM entries WHERE stream_id IN (SELECT value FROM json_each(?)) "
        "AND ts >= ? AND ts < ? LIMIT 1", (ids, lo, hi)).fetchone() is not None)
    while lo < hi:
        if max_windows is not None and windows >= max_windows:
            return
        windows += 1
        if deadline is not None and time.monotonic() > deadline:
            raise QueryTimeout()
        if backward:
            w_lo, w_hi = max(lo, hi - width), hi
        else:
            w_lo, w_hi = lo, min(hi, lo + width)
        planned = w_hi - w_lo
        if sealed:
            w_lo, w_hi = _narrow(sealed, only_stream, w_lo, w_hi, backward)
            w_lo, w_hi = sealed.cut(w_lo, w_hi, only_stream, backward, cap)
        if held is not None:
            rows = held.window(w_lo, w_hi, backward)
        elif head:
            rows = conn.execute(sql + " LIMIT ?",
                                (ids, w_lo, w_hi, *cond_params, head_cap + 1)).fetchall()
            if len(rows) > head_cap:
                rows, w_lo, w_hi = _cut(conn, sql, ids, cond_params, rows, w_lo, w_hi,
                                        backward)
        else:
            rows = []
        if w_hi - w_lo < planned:
            width = max(w_hi - w_lo, 1000)  # the next window starts at the size that fit
        if sealed:
            more = sealed.rows(w_lo, w_hi, only_stream)
            if more:
                rows += more
                sort_rows(rows, backward)
        progress.done(w_lo, w_hi)
        fetched = len(rows)
        if fetched:
            cap = min(cap * 4, target_rows)
            head_cap = min(head_cap * 4, WINDOW_MAX_ROWS)
        for i in range(0, fetched, target_rows):
            yield rows[i:i + target_rows]
            if deadline is not None and time.monotonic() > deadline:
                raise QueryTimeout()
        if backward:
            hi = w_lo
        else:
            lo = w_hi
        # grow quickly through sparse (or heavily filtered) ranges, shrink in dense ones
        if fetched == 0:
            width *= 4
        elif fetched < target_rows // 2:
            width *= 2
        elif fetched > target_rows * 2:
            width = max(width // 2, 1000)
        progress.width = width


# from this many streams on, a scan whose conditions SQLite tests reads the head's rows that
# pass them in one statement over the whole range, not one per window: each statement walks
# every stream's index again (100,000 streams: 68 ms a window before any row is read)
WHOLE_RANGE_STREAMS = 1000


class _HeldRows:
    """The head's rows of a scan that passed its conditions, all of them, in (ts, id) order."""

    __slots__ = ("rows", "stamps")

    def __init__(self, rows: list[Row]):
        sort_rows(rows)
        self.rows = rows
        self.stamps = [r[2] for r in rows]

    def window(self, lo: int, hi: int, backward: bool) -> list[Row]:
        part = self.rows[bisect_left(self.stamps, lo):bisect_left(self.stamps, hi)]
        if backward:
            part.reverse()
        return part


def _held_rows(conn: sqlite3.Connection, where: str, whole: tuple[str, tuple], lo: int,
               hi: int, cond_params: Sequence) -> _HeldRows | None:
    """The head's rows in [lo, hi) that pass the conditions, when there are at most
    WINDOW_MAX_ROWS of them (a rare needle); None when there are more: windows then read
    them a part at a time. Unordered, so a common needle stops SQLite early. `whole`: the
    streams' condition (stream_condition)."""
    streams, stream_params = whole
    rows = conn.execute(_SELECT_WHERE.format(streams=streams) + where + " LIMIT ?",
                        (*stream_params, lo, hi, *cond_params, WINDOW_MAX_ROWS + 1)).fetchall()
    return _HeldRows(rows) if len(rows) <= WINDOW_MAX_ROWS else None


# The head's rows in range counted (lines, bytes) and the ids of those that pass the
# conditions, in one pass. Flat, not over a subquery of (line, hit): the subquery's rows
# carried each line out of the table once more, and 200,000 rows took 1.5x as long
_TALLY = ("SELECT count(*), coalesce(sum(length(CAST(line AS BLOB))), 0), "
          "group_concat(CASE WHEN {cond} THEN id END) "
          "FROM entries WHERE {streams} AND ts >= ? AND ts < ?")
_BY_IDS = ("SELECT id, stream_id, ts, line, metadata FROM entries "
           "WHERE id IN (SELECT value FROM json_each(?))")
# from this many streams on, a tally is split in two halves of the streams, one of them on
# the second reader connection: 20,000 pods' head, 70-80 ms in one statement, 38-64 in two
SPLIT_STREAMS = 2 * WHOLE_RANGE_STREAMS


def _tallied_rows(conn: sqlite3.Connection, where: str, stream_ids: Sequence[int],
                  whole: tuple[str, tuple], lo: int, hi: int, cond_params: Sequence,
                  deadline: float | None) -> tuple[_HeldRows | None, tuple[int, int]]:
    """As _held_rows, and the (lines, bytes) of every head row of the streams in [lo, hi),
    from one pass: reading the head's lines once for the needle and once more for the
    stats was most of a rare needle's head work. With no early stop, so only for needles
    already found rare (by the Bloom filters, or by a sample: _rare_in_sample). Over
    SPLIT_STREAMS streams or more, the second half of them is tallied at the same time on
    the second reader connection (storage/second_reader.py) when it can take it."""
    sql = _TALLY.format(cond=where.removeprefix(" AND "), streams="{streams}")

    def tally(c: sqlite3.Connection, part: tuple[str, tuple], bound: str = "",
              more: tuple = ()) -> tuple[int, int, str | None]:
        streams, stream_params = part
        return c.execute(sql.format(streams=streams) + bound,
                         (*cond_params, *stream_params, lo, hi, *more)).fetchone()

    if len(stream_ids) < SPLIT_STREAMS:
        parts = [tally(conn, whole)]
    else:
        ordered = sorted(stream_ids)
        first = stream_condition(ordered[:len(ordered) // 2])
        second = stream_condition(ordered[len(ordered) // 2:])
        helper = second_reader(conn)
        other = None
        if helper is not None:
            # the helper's snapshot may hold pushes the reader's does not: left out by id
            newest = newest_head_id(conn)
            other = helper.submit(lambda c: tally(c, second, " AND id <= ?", (newest,)),
                                  head_state(conn), deadline)
        parts = [tally(conn, first)]
        found = other.result() if other is not None else None
        parts.append(found if found is not None else tally(conn, second))
    n = sum(p[0] for p in parts)
    size = sum(p[1] for p in parts)
    ids = ",".join(p[2] for p in parts if p[2])
    hits = ids.count(",") + 1 if ids else 0
    if hits > WINDOW_MAX_ROWS:
        return None, (n, size)
    rows = conn.execute(_BY_IDS, (f"[{ids}]",)).fetchall() if hits else []
    return _HeldRows(rows), (n, size)


# Head rows tried when too few sealed blocks can tell whether a needle is rare, and the
# most of them that may pass for it to count as rare. Wrong, it costs one pass: the tally
# finds too many rows, and the windows read the head as they would have
SAMPLE_ROWS = 2000
SAMPLE_MAX_HITS = 20


def _rare_in_sample(conn: sqlite3.Connection, where: str, whole: tuple[str, tuple], lo: int,
                    hi: int, cond_params: Sequence) -> bool:
    streams, stream_params = whole
    (hits,) = conn.execute(
        f"SELECT count(*) FROM (SELECT line, metadata FROM entries WHERE {streams} "
        f"AND ts >= ? AND ts < ? LIMIT {SAMPLE_ROWS}) WHERE {where.removeprefix(' AND ')}",
        (*stream_params, lo, hi, *cond_params)).fetchone()
    return hits <= SAMPLE_MAX_HITS


def _narrow(sealed: SealedBlocks, only_stream: int | None, w_lo: int, w_hi: int,
            backward: bool) -> tuple[int, int]:
    """The window shrunk (at its far end from where the scan comes) until the sealed
    blocks' summaries estimate about WINDOW_MAX_ROWS rows in it, when they estimate more."""
    def estimate(width: int) -> int:
        lo, hi = (w_hi - width, w_hi) if backward else (w_lo, w_lo + width)
        return sealed.estimate(lo, hi, only_stream)

    fits, too_wide = 1, w_hi - w_lo
    if estimate(too_wide) <= WINDOW_MAX_ROWS:
        return w_lo, w_hi
    while too_wide - fits > max(1, too_wide // 64):
        mid = (fits + too_wide) // 2
        if estimate(mid) > WINDOW_MAX_ROWS:
            too_wide = mid
        else:
            fits = mid
    return (w_hi - fits, w_hi) if backward else (w_lo, w_lo + fits)


def _cut(conn: sqlite3.Connection, sql: str, ids: str, cond_params: Sequence, rows: list[Row],
         w_lo: int, w_hi: int, backward: bool) -> tuple[list[Row], int, int]:
    """The head held more than WINDOW_MAX_ROWS rows in the window: keep the rows before the
    last timestamp fetched (all of those are complete) and end the window there."""
    last = rows[-1][2]
    if backward:
        kept = [r for r in rows if r[2] > last]
        w_lo = last + 1
    else:
        kept = [r for r in rows if r[2] < last]
        w_hi = last
    if kept:
        return kept, w_lo, w_hi
    # every row fetched shares one timestamp, the head's first in the window: read all of
    # that nanosecond, and keep the window up to it (sealed rows may lie before it)
    rows = conn.execute(sql, (ids, last, last + 1, *cond_params)).fetchall()
    return (rows, last, w_hi) if backward else (rows, w_lo, last + 1)


# (ts, id) of a row, as a C-level key: a Python function per row was a quarter of sorting
# a window's 16,000 rows
_ts_id = itemgetter(2, 0)
_ts = itemgetter(2)


def sort_rows(rows: list[Row], backward: bool = False) -> None:
    """Rows in (ts, id) order (reversed when `backward`). When no two rows share a
    timestamp, the timestamp alone is that order, and integer keys sort without a tuple per
    row: 17,640 rows of six blocks, 1.8 ms against 3.0 with the check."""
    stamps = list(map(_ts, rows))
    rows.sort(key=_ts if len(set(stamps)) == len(stamps) else _ts_id, reverse=backward)


def scan_by_stream(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int, end: int,
                   *, conditions: LineConditions | None = None, deadline: float | None = None,
                   sealed: "SealedBlocks | None" = None) -> Iterator[list[Row]]:
    """Batches of rows stream after stream, each stream oldest first: no sorting across
    streams (for evaluators that group per stream anyway)."""
    for sid in stream_ids:
        yield from scan_ordered(conn, [sid], start, end, backward=False, conditions=conditions,
                                deadline=deadline, sealed=sealed, only_stream=sid)


def scan_unordered(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int, end: int,
                   *, conditions: LineConditions | None = None, deadline: float | None = None,
                   sealed: "SealedBlocks | None" = None,
                   target_rows: int = TARGET_ROWS) -> Iterator[list[Row]]:
    """Batches of every row with `start <= ts < end`, in no promised order: the head's in
    one statement (index order: stream by stream), then the sealed blocks'. For evaluators
    that sort what they keep; with thousands of streams, windows cost a statement each and
    a statement per stream and window cost more than the rows."""
    if not stream_ids or start >= end:
        return
    where, cond_params = conditions_sql(conditions)
    streams, stream_params = stream_condition(stream_ids)
    cur = conn.execute(_SELECT_WHERE.format(streams=streams) + where,
                       (*stream_params, start, end, *cond_params))
    while True:
        rows = cur.fetchmany(target_rows)
        if not rows:
            break
        yield rows
        if deadline is not None and time.monotonic() > deadline:
            raise QueryTimeout()
    if sealed:
        for rows in sealed.batches(start, end, target_rows):
            if rows:
                yield rows
            if deadline is not None and time.monotonic() > deadline:
                raise QueryTimeout()


# -- what a scan examined -------------------------------------------------------------------

class ScanProgress:
    """The contiguous part [lo, hi) of the query range an ordered scan has read, and the
    width of its next window."""

    __slots__ = ("lo", "hi", "width", "head_totals")

    def __init__(self) -> None:
        self.lo = self.hi = 0
        self.width = 0
        # (lo, hi, lines, bytes) of the head's rows, when a scan counted them on its way
        self.head_totals: tuple[int, int, int, int] | None = None

    def begin(self, start: int, end: int, backward: bool) -> None:
        self.lo = self.hi = end if backward else start
        self.width = FIRST_WINDOW_NS

    def done(self, w_lo: int, w_hi: int) -> None:
        self.lo = min(self.lo, w_lo)
        self.hi = max(self.hi, w_hi)


def range_counts(conn: sqlite3.Connection, stream_ids: Sequence[int], lo: int, hi: int,
                 sealed: SealedBlocks,
                 head: tuple[int, int, int, int] | None = None) -> tuple[int, int]:
    """(lines, bytes) stored for `stream_ids` with lo <= ts < hi: the head's rows counted in
    SQLite (the sealer keeps the head small) unless `head` (ScanProgress.head_totals)
    counted a range already, the sealed ones from the block summaries of the scan (a block
    cut by the range is counted from its timestamps and line lengths). A scan that stopped
    inside the range `head` counted has read all of that range's head: the range covered
    is then `head`'s, and no second pass counts a part of it."""
    if not stream_ids or lo >= hi:
        return 0, 0
    if head is not None and head[0] <= lo and hi <= head[1]:
        lo, hi = head[:2]
        n, size = head[2:]
    else:
        streams, stream_params = stream_condition(stream_ids)
        n, size = conn.execute(
            "SELECT count(*), coalesce(sum(length(CAST(line AS BLOB))), 0) FROM entries "
            f"WHERE {streams} AND ts >= ? AND ts < ?", (*stream_params, lo, hi)).fetchone()
    sealed_n, sealed_size = sealed.counts(lo, hi)
    return n + sealed_n, size + sealed_size
