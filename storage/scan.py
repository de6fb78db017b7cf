"""SQL scans of log entries for the query engine: by stream ids and time range, in batches,
newest-first or oldest-first, with optional exact-superset line conditions evaluated inside
SQLite.

Rows are `(id, stream_id, ts, line, metadata)`; `metadata` is the stored JSON text or None.

Ordered scans walk the time range in windows that grow while they return few rows and shrink
when they return many: a query that stops after `limit` entries touches only the newest (or
oldest) few windows, and each window's ORDER BY sorts only that window's rows. Stream ids go
in as one JSON array parameter (`json_each`), so any number of streams needs one placeholder.

Line conditions (`LineConditions`) are derived by the planner from the leading line filters:
every line they reject is one the pipeline would reject too, so they may only narrow the scan;
the pipeline still checks every row it receives. They run in C inside SQLite, which makes a
rare-needle scan several times faster than shipping every line to Python.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from logql.errors import QueryTimeout

MINUTE_NS = 60 * 10**9
FIRST_WINDOW_NS = 60 * 10**9
TARGET_ROWS = 4000
# SQLite's default SQLITE_MAX_LIKE_PATTERN_LENGTH is 50000
_MAX_LIKE = 40000
# ASCII letters whose Unicode case-fold orbit holds a non-ASCII character (K: Kelvin sign,
# S: long s). SQLite's LIKE folds ASCII only, so a needle with one of these could miss a
# line that Go's (?i) would match.
_FOLD_OUTSIDE_ASCII = set("kKsS")

Row = tuple  # (id, stream_id, ts, line, metadata)


@dataclass
class LineConditions:
    """Conditions on the stored line that every line kept by the query satisfies.

    `all_of`: an AND of ORs of needles `(text, case_insensitive)`; `none_of`: substrings no
    kept line contains. Needles the SQL dialect cannot test exactly are left out (which only
    widens the scan). `label_values`: `(name, value)` pairs a `| parser | name="value"`
    filter demands of streams without that label: the line holds the value, or a backslash
    that could hide it, or the entry's metadata has the label (see RequiredLabelValues)."""
    all_of: list[list[tuple[str, bool]]] = field(default_factory=list)
    none_of: list[str] = field(default_factory=list)
    label_values: list[tuple[str, str]] = field(default_factory=list)

    def sql(self) -> tuple[str, list]:
        """(` AND ...` fragment, parameters); empty when nothing applies."""
        parts: list[str] = []
        params: list = []
        for clause in self.all_of:
            alts: list[str] = []
            alt_params: list = []
            for text, ci in clause:
                if not ci:
                    alts.append("instr(line, ?) > 0")
                    alt_params.append(text)
                elif _like_safe(text):
                    alts.append("line LIKE ? ESCAPE '\\'")
                    alt_params.append("%" + _like_escape(text) + "%")
                else:
                    alts = []  # one untestable alternative makes the whole OR untestable
                    break
            if alts:
                parts.append("(" + " OR ".join(alts) + ")" if len(alts) > 1 else alts[0])
                params.extend(alt_params)
        for text in self.none_of:
            parts.append("instr(line, ?) = 0")
            params.append(text)
        for name, value in self.label_values:
            # metadata is compact JSON written by the ingester: a key reads "name":
            parts.append("(instr(line, ?) > 0 OR instr(line, '\\') > 0 "
                         "OR instr(coalesce(metadata, ''), ?) > 0)")
            params.extend((value, f'"{name}":'))
        if not parts:
            return "", []
        return " AND " + " AND ".join(parts), params

    def __bool__(self) -> bool:
        return bool(self.sql()[0])


def _like_safe(text: str) -> bool:
    return (0 < len(text) < _MAX_LIKE and text.isascii()
            and not any(c in _FOLD_OUTSIDE_ASCII for c in text))


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _ids_param(stream_ids: Sequence[int]) -> str:
    return json.dumps(list(stream_ids))


_SELECT = ("SELECT id, stream_id, ts, line, metadata FROM entries "
           "WHERE stream_id IN (SELECT value FROM json_each(?)) AND ts >= ? AND ts < ?")


def scan_ordered(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int, end: int, *,
                 backward: bool, conditions: LineConditions | None = None,
                 deadline: float | None = None, target_rows: int = TARGET_ROWS,
                 progress: "ScanProgress | None" = None,
                 max_windows: int | None = None) -> Iterator[list[Row]]:
    """Batches of rows with `start <= ts < end`, in global `ts` order (ties by id), newest
    first when `backward`. Stop iterating whenever you have enough: nothing further is read.

    `progress`, if given, records the part of [start, end) that has been read (so the caller
    can count what was examined, see `range_counts`) and the current window width; a scan
    given the same progress continues where the previous one left off. `max_windows` ends
    the scan early, after that many windows."""
    if not stream_ids or start >= end:
        return
    where, cond_params = conditions.sql() if conditions else ("", [])
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
        cur = conn.execute(sql, (ids, w_lo, w_hi, *cond_params))
        # ORDER BY made SQLite read the whole window before its first row
        progress.done(w_lo, w_hi)
        fetched = 0
        while True:
            rows = cur.fetchmany(target_rows)
            if not rows:
                break
            fetched += len(rows)
            yield rows
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


def scan_by_stream(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int, end: int,
                   *, conditions: LineConditions | None = None, deadline: float | None = None,
                   batch: int = TARGET_ROWS) -> Iterator[list[Row]]:
    """Batches of rows stream after stream, each stream oldest first: no sorting across
    streams (for evaluators that group per stream anyway)."""
    where, cond_params = conditions.sql() if conditions else ("", [])
    sql = ("SELECT id, stream_id, ts, line, metadata FROM entries "
           "WHERE stream_id = ? AND ts >= ? AND ts < ?" + where + " ORDER BY ts, id")
    for sid in stream_ids:
        cur = conn.execute(sql, (sid, start, end, *cond_params))
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise QueryTimeout()
            rows = cur.fetchmany(batch)
            if not rows:
                break
            yield rows


_ROW_COLUMNS = "id, stream_id, ts, line, metadata"
_KEY_COLUMNS = "id, stream_id, ts"


def rows_by_ids(conn: sqlite3.Connection, entry_ids: Sequence[int], stream_ids: Sequence[int],
                start: int, end: int, conditions: LineConditions | None = None, *,
                keys_only: bool = False) -> list[Row]:
    """The rows among `entry_ids` that belong to `stream_ids` and [start, end), unordered
    (for candidates from a prefilter index). `keys_only`: just `(id, stream_id, ts)`, so a
    caller can order many candidates and read the lines of the first few only."""
    if not entry_ids or not stream_ids:
        return []
    where, cond_params = conditions.sql() if conditions else ("", [])
    sql = ("SELECT " + (_KEY_COLUMNS if keys_only else _ROW_COLUMNS) + " FROM entries "
           "WHERE id IN (SELECT value FROM json_each(?)) "
           "AND stream_id IN (SELECT value FROM json_each(?)) AND ts >= ? AND ts < ?" + where)
    out: list[Row] = []
    for i in range(0, len(entry_ids), 50_000):
        chunk = json.dumps(list(entry_ids[i:i + 50_000]))
        out.extend(conn.execute(sql, (chunk, _ids_param(stream_ids), start, end,
                                      *cond_params)))
    return out


def rows_after_id(conn: sqlite3.Connection, after_id: int, stream_ids: Sequence[int],
                  start: int, end: int, conditions: LineConditions | None = None, *,
                  keys_only: bool = False) -> list[Row]:
    """Rows with id > after_id (the part a prefilter index has not seen yet), unordered.
    The unary `+` keeps SQLite on the rowid range instead of the (stream_id, ts) index."""
    if not stream_ids:
        return []
    where, cond_params = conditions.sql() if conditions else ("", [])
    sql = ("SELECT " + (_KEY_COLUMNS if keys_only else _ROW_COLUMNS) + " FROM entries "
           "WHERE id > ? "
           "AND +stream_id IN (SELECT value FROM json_each(?)) AND +ts >= ? AND +ts < ?"
           + where)
    return conn.execute(sql, (after_id, _ids_param(stream_ids), start, end,
                              *cond_params)).fetchall()


# -- what a scan examined -------------------------------------------------------------------

class ScanProgress:
    """The contiguous part [lo, hi) of the query range an ordered scan has read, and the
    width of its next window."""

    __slots__ = ("lo", "hi", "width")

    def __init__(self) -> None:
        self.lo = self.hi = 0
        self.width = 0

    def begin(self, start: int, end: int, backward: bool) -> None:
        self.lo = self.hi = end if backward else start
        self.width = FIRST_WINDOW_NS

    def done(self, w_lo: int, w_hi: int) -> None:
        self.lo = min(self.lo, w_lo)
        self.hi = max(self.hi, w_hi)


def range_counts(conn: sqlite3.Connection, stream_ids: Sequence[int], lo: int,
                 hi: int) -> tuple[int, int]:
    """(lines, bytes) stored for `stream_ids` with lo <= ts < hi: whole minutes from the
    rollups, the partial minutes at either edge counted from the entries themselves."""
    if not stream_ids or lo >= hi:
        return 0, 0
    ids = _ids_param(stream_ids)
    first_full = -(-lo // MINUTE_NS) * MINUTE_NS
    last_full = (hi // MINUTE_NS) * MINUTE_NS
    if first_full >= last_full:
        return _exact_counts(conn, ids, lo, hi)
    lines, size = conn.execute(
        "SELECT coalesce(sum(lines), 0), coalesce(sum(bytes), 0) FROM rollups "
        "WHERE stream_id IN (SELECT value FROM json_each(?)) AND minute >= ? AND minute < ?",
        (ids, first_full, last_full)).fetchone()
    for a, b in ((lo, first_full), (last_full, hi)):
        if a < b:
            n, s = _exact_counts(conn, ids, a, b)
            lines += n
            size += s
    return lines, size


def _exact_counts(conn: sqlite3.Connection, ids: str, lo: int, hi: int) -> tuple[int, int]:
    n, s = conn.execute(
        "SELECT count(*), coalesce(sum(length(CAST(line AS BLOB))), 0) FROM entries "
        "WHERE stream_id IN (SELECT value FROM json_each(?)) AND ts >= ? AND ts < ?",
        (ids, lo, hi)).fetchone()
    return n, s
