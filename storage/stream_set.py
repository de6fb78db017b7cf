"""A read's stream ids as one SQL condition, for statements over a whole query range.

SQLite tests `stream_id IN (SELECT value FROM json_each(?))` by building a temporary index
of the list and probing it for every row it reads. A broad selector on a store where one
tenant has the file to itself matches stream ids that are runs of consecutive numbers
(often a single run: every stream the tenant has), and a few `BETWEEN`s test those with
two comparisons a row and let SQLite walk the `stream_id` index once, not seek it per
stream. At 100,000 streams the needle's one pass over the head's 400,000 rows went from
339 to 285 ms and the block ids of the range from 71 to 30 ms (bench/REPORT.md, issue 22).

Only for statements that read a stream's rows over the whole range: a window of an ordered
scan reads a few seconds of each stream, where a seek per stream beats walking each
stream's every row that a range of ids covers.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable

import numpy as np

# at most this many ranges are tested one after another; more runs are a JSON list
MAX_RUNS = 8
# fewer ids than this: the list is small, and its probes cheap
MIN_IDS = 1000


def stream_condition(stream_ids: Iterable[int], column: str = "stream_id",
                     listed: str | None = None) -> tuple[str, tuple]:
    """(SQL condition on `column`, its parameters) that holds exactly for `stream_ids`.
    `listed`: the ids as the JSON list a caller made already (not encoded again)."""
    if not isinstance(stream_ids, Collection):
        stream_ids = list(stream_ids)  # an iterator, read once
    if len(stream_ids) >= MIN_IDS:
        runs = id_runs(stream_ids)
        if runs is not None:
            sql = " OR ".join(f"{column} BETWEEN ? AND ?" for _ in runs)
            return (f"({sql})" if len(runs) > 1 else sql,
                    tuple(v for run in runs for v in run))
    if listed is None:
        listed = json.dumps(list(stream_ids))
    return f"{column} IN (SELECT value FROM json_each(?))", (listed,)


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """np.unique(values), each value once in order, by a sort: numpy 2's np.unique hashes
    first, 4 ms for 20,000 stream ids against 1.4 (most of which is reading the list), and
    85 % of encoding a small block's Bloom filter (codec.numpy_bloom)."""
    ordered = np.sort(values)
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def id_runs(stream_ids: Collection[int]) -> list[tuple[int, int]] | None:
    """The ids as (first, last) runs of consecutive numbers, or None when they are more
    than MAX_RUNS."""
    ids = sorted_distinct(np.fromiter(stream_ids, dtype=np.int64, count=len(stream_ids)))
    if ids.size == 0:
        return None
    breaks = np.flatnonzero(np.diff(ids) != 1)
    if breaks.size >= MAX_RUNS:
        return None
    firsts = [int(ids[0])] + [int(ids[b + 1]) for b in breaks]
    lasts = [int(ids[b]) for b in breaks] + [int(ids[-1])]
    return list(zip(firsts, lasts))
