"""Counts of sealed rows without their lines: the sealed part of what storage/rollups.py's
entry counts give for the head (both add up), read from the blocks' timestamps and line
lengths, many blocks to a statement."""

from __future__ import annotations

import json
import sqlite3
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from logql.model import MINUTE_NS
from storage.blocks import codec as B
from storage.blocks.sealed import Summary, _block_columns, counts_in, summaries


@dataclass
class Counts:
    """What counting needs of a block: timestamps, line byte offsets, metadata (or None)."""
    ts: np.ndarray
    offsets: np.ndarray
    metadata: list[str | None] | None


def iter_counts(conn: sqlite3.Connection, found: Sequence[Summary],
                metadata: bool = True) -> Iterator[tuple[Summary, Counts]]:
    """(summary, counts) of each block, in no particular order, read many to a statement."""
    by_id = {s.id: s for s in found}
    cols = "keys, lengths, metadata" if metadata else "keys, lengths"
    for bid, keys, lengths, *md in _block_columns(conn, list(by_id), cols):
        s = by_id[bid]
        ts, offsets = B.decode_ts_offsets(keys, lengths, s.rows)
        yield s, Counts(ts, offsets, B.decode_metadata(md[0], s.rows)
                        if metadata and md[0] else None)


def sealed_range_counts(conn: sqlite3.Connection, stream_ids: Sequence[int], lo: int,
                        hi: int) -> tuple[int, int]:
    """(lines, bytes) of the sealed rows with lo <= ts < hi."""
    return counts_in(conn, [s for s, _ in summaries(conn, stream_ids, lo, hi)], lo, hi)


def sealed_totals(conn: sqlite3.Connection, stream_ids: Sequence[int],
                  ranges: Sequence[tuple[int, int]],
                  with_bytes: bool = True) -> Iterator[tuple[int, str, int, int, int]]:
    """(stream_id, metadata, range index, lines, bytes) of the sealed rows with
    lo < ts <= hi per range, like rollups.entry_totals for the head."""
    if not ranges:
        return
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    los = [ranges[i][0] for i in order]
    span_lo = min(los)
    span_hi = max(h for _, h in ranges)
    wanted: dict[int, list[int]] = {}
    found = []
    for s, _ in summaries(conn, stream_ids, span_lo + 1, span_hi + 1):
        picked = [order[k] for k in range(bisect_left(los, s.max_ts))
                  if ranges[order[k]][1] >= s.min_ts]
        if picked:
            wanted[s.id] = picked
            found.append(s)
    for s, c in iter_counts(conn, found):
        picked = wanted[s.id]
        a = np.searchsorted(c.ts, [ranges[i][0] for i in picked], side="right").tolist()
        b = np.searchsorted(c.ts, [ranges[i][1] for i in picked], side="right").tolist()
        for i, x, y in zip(picked, a, b):
            yield from _tally(s.stream_id, c, x, y, i, with_bytes)


def sealed_at(conn: sqlite3.Connection, stream_ids: Sequence[int],
              timestamps: Sequence[int],
              with_bytes: bool = True) -> Iterator[tuple[int, str, int, int, int]]:
    """(stream_id, metadata, ts, lines, bytes) of the sealed rows at exactly these ts."""
    if not timestamps:
        return
    points = sorted(set(timestamps))
    # the rollups ask for whole minutes: a block without a row on one has nothing to give
    whole_minutes = all(x % MINUTE_NS == 0 for x in points)
    at: dict[int, list[int]] = {}
    found = []
    for s, _ in summaries(conn, stream_ids, points[0], points[-1] + 1, aligned=whole_minutes):
        inside = points[bisect_left(points, s.min_ts):bisect_right(points, s.max_ts)]
        if inside:
            at[s.id] = inside
            found.append(s)
    for s, c in iter_counts(conn, found):
        inside = at[s.id]
        a = np.searchsorted(c.ts, inside, side="left").tolist()
        b = np.searchsorted(c.ts, inside, side="right").tolist()
        for x, lo, hi in zip(inside, a, b):
            yield from _tally(s.stream_id, c, lo, hi, x, with_bytes)


def _tally(sid: int, c: Counts, a: int, b: int, key: int,
           with_bytes: bool) -> Iterator[tuple[int, str, int, int, int]]:
    if a >= b:
        return
    offs = c.offsets
    if c.metadata is None:
        yield sid, "", key, b - a, int(offs[b] - offs[a]) if with_bytes else 0
        return
    groups: dict[str, list[int]] = {}
    sizes = np.diff(offs[a:b + 1]).tolist()
    for md, size in zip(c.metadata[a:b], sizes):
        g = groups.setdefault(md or "", [0, 0])
        g[0] += 1
        g[1] += size
    for md, (n, size) in groups.items():
        yield sid, md, key, n, size if with_bytes else 0


def segment_count(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int,
                  end: int) -> int:
    """Sealed blocks overlapping [start, end], plus one per stream with head rows there
    (packs or `entries` rows: a stream's head is one segment, however many pushes made it)."""
    ids = json.dumps(list(stream_ids))
    blocks = conn.execute(
        "SELECT count(*) FROM blocks WHERE stream_id IN (SELECT value FROM json_each(?)) "
        "AND max_ts >= ? AND min_ts <= ? AND NOT flags & 4", (ids, start, end)).fetchone()[0]
    # index probes per stream, not a scan of the head's rows in range
    heads = conn.execute(
        "SELECT count(*) FROM json_each(?1) j WHERE EXISTS (SELECT 1 FROM blocks "
        "WHERE flags & 4 AND stream_id = j.value AND min_ts <= ?3 AND max_ts >= ?2) "
        "OR EXISTS (SELECT 1 FROM entries WHERE stream_id = j.value AND ts >= ?2 AND ts <= ?3)",
        (ids, start, end)).fetchone()[0]
    return blocks + heads
