"""The logfmt unwrap shortcut (unwrap_scan.py) over whole column batches
(`Reader.line_columns`): `quantile_over_time(0.99, {job="app"} | logfmt | unwrap latency_ms
[5m]) by (host)` over sealed blocks without a tuple, a str or a Python call per line.

Per block: the lines column gets a 0xFF byte before each line (a byte UTF-8 never holds), so
one `findall` of the shortcut's expression over the whole column gives exactly one value per
line, empty where the expression does not take the line; values become one float array; the
series key is worked out once per (stream, metadata text) and mapped over the block's
metadata index column. The lines the expression does not take, and every line of a (stream,
metadata) whose key a line could change, go through the general pipeline one by one, as on
the row path, so every answer is the general path's (tests/metrics/test_unwrap_columns.py).
The head's rows, and the rows of streams a delete request names (services/read/visibility.py
hands those over as rows only), take the row shortcut.

Each series' samples are put in the order the row path gives them (time, then stream, then
entry id). `window_quantiles` computes `quantile_over_time` on those arrays when windows do
not overlap (range <= step), with the general path's arithmetic step by step.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from logql.engine.common import LabelKey
from logql.engine.unwrap_scan import DROPPED, LogfmtUnwrapScan
from logql.reading import LineColumns, Reader, utf8_len

_UNSET = object()


class _Series:
    """One series' samples as chunks (arrays, or single rows), ordered once at the end."""

    __slots__ = ("ts", "values", "ranks", "ids", "row_ts", "row_values", "row_ranks",
                 "row_ids")

    def __init__(self) -> None:
        self.ts: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.ranks: list[np.ndarray] = []
        self.ids: list[np.ndarray] = []
        self.row_ts: list[int] = []
        self.row_values: list[float] = []
        self.row_ranks: list[int] = []
        self.row_ids: list[int] = []

    def add(self, ts: np.ndarray, values: np.ndarray, rank: int, ids: np.ndarray) -> None:
        self.ts.append(ts)
        self.values.append(values)
        self.ranks.append(np.full(len(ts), rank, dtype=np.int64))
        self.ids.append(ids)

    def add_row(self, ts: int, value: float, rank: int, entry_id: int) -> None:
        self.row_ts.append(ts)
        self.row_values.append(value)
        self.row_ranks.append(rank)
        self.row_ids.append(entry_id)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self.row_ts:
            self.add(np.array(self.row_ts, dtype=np.int64),
                     np.array(self.row_values, dtype=np.float64), 0,
                     np.array(self.row_ids, dtype=np.int64))
            self.ranks[-1] = np.array(self.row_ranks, dtype=np.int64)
        ts = np.concatenate(self.ts)
        values = np.concatenate(self.values)
        ids = np.concatenate(self.ids)
        ranks = np.concatenate(self.ranks)
        if (ts[1:] > ts[:-1]).all():
            # already in (ts, stream, id) order, as one stream's blocks mostly come: kept
            return ts, values
        order = np.lexsort((ids, ranks, ts))
        return ts[order], values[order]


def scan_columns(reader: Reader, sids: Sequence[int], label_sets, start: int, end: int,
                 shortcut: LogfmtUnwrapScan, stream_pipes: dict, unwrap: Any,
                 key_of: Callable, sm_of: Callable[[str | None], Any], stats: Any
                 ) -> dict[LabelKey, tuple[np.ndarray, np.ndarray]]:
    """Samples per series, `key -> (timestamps, values)` as arrays in the row path's order,
    of every row of `sids` with start <= ts < end."""
    series: dict[LabelKey, _Series] = {}
    rank_of = {sid: i for i, sid in enumerate(sids)}
    # (stream, metadata text) -> the series key of the lines the shortcut reads, or None
    shortcut_keys: dict[tuple[int, str | None], LabelKey | None] = {}
    lines = size = kept = 0

    def fast_key(sid: int, md: str | None) -> LabelKey | None:
        fk = (sid, md)
        key = shortcut_keys.get(fk, _UNSET)
        if key is _UNSET:
            key = shortcut_keys[fk] = shortcut.key_for(label_sets[sid], sm_of(md), key_of)
        return key

    def general(sid: int, entry_id: int, ts: int, line: str, md: str | None) -> None:
        nonlocal kept
        sm = sm_of(md)
        out = stream_pipes[sid].process(ts, line, sm)
        if out is None:
            return
        new_line, lb = out
        value = unwrap.extract(ts, new_line, lb)
        if value is None:
            return
        kept += 1
        key = key_of(lb)
        s = series.get(key)
        if s is None:
            s = series[key] = _Series()
        s.add_row(ts, value, rank_of[sid], entry_id)

    def row(entry_id: int, sid: int, ts: int, line: str, md: str | None) -> None:
        nonlocal kept
        key = fast_key(sid, md)
        if key is not None:
            value = shortcut.value(line)
            if value is DROPPED:
                return
            if value is not None:
                kept += 1
                s = series.get(key)
                if s is None:
                    s = series[key] = _Series()
                s.add_row(ts, value, rank_of[sid], entry_id)
                return
        general(sid, entry_id, ts, line, md)

    for batch in reader.line_columns(sids, start, end):
        reader.check_deadline()
        if isinstance(batch, list):
            for r in batch:
                lines += 1
                size += utf8_len(r[3])
                row(*r)
            continue
        lc: LineColumns = batch
        rows = lc.rows
        lines += rows
        size += len(lc.lines)
        sid = lc.stream_id
        texts = lc.metadata_texts
        # the key of each metadata slot, the last one for rows without metadata (index -1)
        slot_keys = [fast_key(sid, md) for md in [*texts, None]]
        distinct = {k for k in slot_keys if k is not None}
        every = False
        if not distinct:
            taken = np.zeros(rows, dtype=bool)
            values = None
        else:
            taken, values = shortcut.column_samples(lc)
            every = bool(taken.all())
            if not every:
                values = values[taken]
            if None in slot_keys:
                readable = np.array([k is not None for k in slot_keys], dtype=bool)
                readable_rows = readable[lc.metadata]
                values = values[readable_rows[taken]]
                taken &= readable_rows
                every = False
        if values is not None and len(values):
            rank = rank_of[sid]
            ts_t, ids_t = (lc.ts, lc.ids) if every else (lc.ts[taken], lc.ids[taken])
            kept += len(values)
            if len(distinct) == 1:
                key = next(iter(distinct))
                s = series.get(key)
                if s is None:
                    s = series[key] = _Series()
                s.add(ts_t, values, rank, ids_t)
            else:
                slot_of = np.array([-1 if k is None else i for i, k in enumerate(slot_keys)],
                                   dtype=np.int64)
                md_t = lc.metadata[taken]
                for key in distinct:
                    slots = [i for i, k in enumerate(slot_keys) if k == key]
                    mine = np.isin(slot_of[md_t], slots)
                    s = series.get(key)
                    if s is None:
                        s = series[key] = _Series()
                    s.add(ts_t[mine], values[mine], rank, ids_t[mine])
        if not every:
            ts_l, ids_l = lc.ts, lc.ids
            for i in np.flatnonzero(~taken).tolist():
                general(sid, int(ids_l[i]), int(ts_l[i]), lc.line(i), lc.metadata_text(i))
    stats.lines_scanned += lines
    stats.bytes_scanned += size
    stats.post_filter_lines += kept
    return {key: s.arrays() for key, s in series.items()}


def window_quantiles(q: float, ts: np.ndarray, values: np.ndarray,
                     windows: Sequence[tuple[int, int]]) -> list[float | None] | None:
    """`quantile_over_time(q)` of each window `(lo, hi]` (None where it holds no sample), as
    functions.sliding_quantiles gives it for windows that do not overlap: each window's
    values sorted (stably), then `_ranked`'s arithmetic. None when this cannot promise the
    same floats (overlapping windows, a NaN value, q outside [0, 1])."""
    if not 0.0 <= q <= 1.0 or np.isnan(values).any():
        return None
    lows = np.array([w[0] for w in windows], dtype=np.int64)
    highs = np.array([w[1] for w in windows], dtype=np.int64)
    i = np.searchsorted(ts, lows, side="right")
    j = np.searchsorted(ts, highs, side="right")
    if len(i) > 1 and not (i[1:] >= j[:-1]).all():
        return None
    n = j - i
    full = n > 0
    starts, lens = i[full], n[full]
    out: list[float | None] = [None] * len(windows)
    if not len(lens):
        return out
    # the samples of each window, window after window (the windows are disjoint and sorted)
    total = int(lens.sum())
    base = np.cumsum(lens) - lens
    take = np.repeat(starts - base, lens) + np.arange(total, dtype=np.int64)
    seg = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    # by window, then value, ties in series order: a stable sort by value, then a stable
    # one by window (a radix sort on 16-bit window numbers)
    picked = values[take]
    by_value = np.argsort(picked, kind="stable")
    wseg = seg[by_value]
    if len(lens) <= np.iinfo(np.int16).max:
        wseg = wseg.astype(np.int16)
    ordered = picked[by_value[np.argsort(wseg, kind="stable")]]
    rank = q * (lens - 1).astype(np.float64)
    floor = np.floor(rank)
    lower = np.maximum(0.0, floor)
    upper = np.minimum(lens - 1.0, lower + 1)
    weight = rank - floor
    result = ordered[base + lower.astype(np.int64)] * (1 - weight) + \
        ordered[base + upper.astype(np.int64)] * weight
    for k, v in zip(np.flatnonzero(full).tolist(), result.tolist()):
        out[k] = v
    return out
