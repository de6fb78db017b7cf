"""`Reader.line_columns` for SQLite: the head's rows as row batches (one statement, as an
unordered scan reads them), then each sealed block overlapping the range as one
`LineColumns`, its columns decoded straight into arrays and its lines left as the one bytes
object the block stores: no tuple and no str per row. For evaluators that work on whole
columns (logql/engine/unwrap_columns.py). No line conditions or Bloom filters here: the
callers read every row of the range.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Iterator, Sequence

import numpy as np

from logql.reading import LineColumns, Row
from storage import scan
from storage.blocks import codec as B
from storage.blocks.sealed import Summary, _stream_then_start, summaries

# blocks fetched per statement: a few MB of compressed columns at most
FETCH_BLOCKS = 32
_SQL = ("SELECT id, keys, lengths, metadata, lines FROM blocks "
        "WHERE id IN (SELECT value FROM json_each(?))")


def line_columns(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int, end: int,
                 deadline: float | None) -> Iterator[LineColumns | list[Row]]:
    """Rows of the streams with start <= ts < end: the head's, then the blocks'."""
    if not stream_ids or start >= end:
        return
    yield from scan.scan_unordered(conn, stream_ids, start, end, deadline=deadline)
    found = sorted((s for s, _ in summaries(conn, stream_ids, start, end)),
                   key=_stream_then_start)
    for i in range(0, len(found), FETCH_BLOCKS):
        group = found[i:i + FETCH_BLOCKS]
        fetched = {r[0]: r[1:] for r in conn.execute(
            _SQL, (json.dumps([s.id for s in group]),))}
        for s in group:
            cols = block_columns(s, *fetched[s.id], start, end)
            if cols is not None:
                yield cols


def block_columns(s: Summary, keys: bytes, lengths: bytes, metadata: bytes, lines: bytes,
                  start: int, end: int) -> LineColumns | None:
    """One block's rows with start <= ts < end as columns; None when it has none."""
    n = s.rows
    ts, ids = B.decode_key_arrays(keys, n)
    a, b = 0, n
    if s.min_ts < start or s.max_ts >= end:
        a, b = (int(x) for x in np.searchsorted(ts, [start, end], side="left"))
        if a >= b:
            return None
    offsets = B.decode_offsets(lengths, n)
    md_index, md_texts = B.decode_metadata_index(metadata, n)
    raw = B._decompress(lines)
    if a or b < n:
        lo, hi = int(offsets[a]), int(offsets[b])
        raw = raw[lo:hi]
        offsets = offsets[a:b + 1] - lo
        ts, ids, md_index = ts[a:b], ids[a:b], md_index[a:b]
    return LineColumns(s.stream_id, ts, ids, raw, offsets, md_index, md_texts)
