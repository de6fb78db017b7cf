"""Log query evaluation over SQLite (logql.md §6), and the pipeline feed of metric queries.

Runs on a reader thread (`await db.read(evaluate_log_query, ...)`): every function here takes
the reader's connection first.

    evaluate_log_query(conn, tenant, query, start, end, limit=..., backward=...) -> list
        the `streams` result of a log query: limit, direction and interval applied;
    iter_pipeline(conn, tenant, query, start, end) -> (ts, line, labels) for every entry the
        pipeline keeps, oldest first (for metric queries);
    iter_samples(conn, tenant, query, unwrap, start, end) -> (ts, value, labels) for
        unwrapped range aggregations.

Plan: stream selector -> stream ids via postings (storage.streams); rows of those streams in
[start, end) read in time-ordered windows (storage.scan) with the leading line filters
evaluated inside SQLite, or, for selective needles, candidates from the FTS index plus the
unindexed tail; then the compiled pipeline in Python; stop as soon as `limit` entries are kept.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Callable, Iterator, Sequence

import msgspec

from logql import ast as A
from logql.compile import LogPlan, compile_log_query, compile_unwrap
from logql.labels import LabelsBuilder
from logql.results import QueryStats, categorized_labels, categorized_result, streams_result
from storage import scan
from storage.streams import select_stream_ids, stream_label_sets

INTERVAL_SPLIT_NS = 3600 * 10**9  # Loki thins `interval` per 1 h query split (observed #13)
INSTANT_LOOKBACK_NS = 30 * 10**9   # range of a log query sent to the instant endpoint
# windows a limited query scans plainly before it asks the FTS index (see _Feed.batches)
PLAIN_WINDOWS = 3
FIRST_CANDIDATE_BATCH = 500

_decode_md = msgspec.json.Decoder(dict[str, str]).decode


class _FixedLabels:
    """Labels of an entry whose pipeline only filters lines: the same for every entry of a
    (stream, structured metadata) pair, so computed once."""

    __slots__ = ("_labels", "_categories")

    def __init__(self, builder: LabelsBuilder):
        self._labels = dict(builder.labels())
        self._categories = builder.categories()

    def labels(self) -> dict[str, str]:
        return self._labels

    def categories(self) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        return self._categories


class _Feed:
    """Rows of one query's streams, through the pipeline."""

    def __init__(self, conn: sqlite3.Connection, plan: LogPlan, tenant: str, start: int,
                 end: int, stats: QueryStats, deadline: float | None):
        self.conn, self.plan, self.start, self.end = conn, plan, start, end
        self.stats, self.deadline = stats, deadline
        self.ids = select_stream_ids(conn, tenant, plan.matchers, start, end)
        stats.streams += len(self.ids)
        raw = stream_label_sets(conn, self.ids, tenant)
        # sorted by name: a builder that nothing touched hands back this very dict
        self.labels = {sid: dict(sorted(raw[sid].items())) for sid in self.ids}
        self.conditions = plan.conditions_for(self.labels.values())
        self._progress: scan.ScanProgress | None = None
        self._counted_rows = False

    # -- rows ------------------------------------------------------------------------------
    def batches(self, backward: bool, ordered: bool = True,
                limited: bool = False) -> Iterator[list[scan.Row]]:
        """Row batches in direction order (`ordered`) or stream after stream.

        With FTS needles: a query that may stop early (`limited`) first scans the newest (or
        oldest) few windows plainly, since a common needle fills the limit there at once;
        only what remains goes through the index, whose candidate list costs the same
        whether the needle is rare or not."""
        plan = self.plan
        conn, ids, deadline = self.conn, self.ids, self.deadline
        if not plan.needles:
            yield from self._scan(backward, ordered)
            return
        progress = self._progress = scan.ScanProgress()
        lo, hi = self.start, self.end
        if limited and ordered:
            yield from scan.scan_ordered(conn, ids, lo, hi, backward=backward,
                                         conditions=self.conditions, deadline=deadline,
                                         progress=progress, max_windows=PLAIN_WINDOWS)
            if progress.width:
                lo, hi = (lo, progress.lo) if backward else (progress.hi, hi)
            if lo >= hi:
                return
        keys = fts_candidates(conn, plan, ids, lo, hi, self.conditions)
        if keys is None:
            if ordered:
                yield from scan.scan_ordered(conn, ids, self.start, self.end,
                                             backward=backward, conditions=self.conditions,
                                             deadline=deadline, progress=progress)
            else:
                yield from self._scan(backward, ordered)
            return
        # order the candidates by their keys, read lines only as far as the caller goes
        keys.sort(key=_key_order if ordered else _stream_order, reverse=backward and ordered)
        for a, b in _batch_starts(len(keys), FIRST_CANDIDATE_BATCH, scan.TARGET_ROWS):
            if deadline is not None and time.monotonic() > deadline:
                raise scan.QueryTimeout()
            chunk = keys[a:b]
            rows = scan.rows_by_ids(conn, [k[0] for k in chunk], ids, lo, hi)
            rows.sort(key=_key_order if ordered else _stream_order,
                      reverse=backward and ordered)
            self.stats.lines_scanned += len(rows)
            self.stats.bytes_scanned += sum(_utf8_len(r[3]) for r in rows)
            yield rows

    def _scan(self, backward: bool, ordered: bool) -> Iterator[list[scan.Row]]:
        progress = self._progress = scan.ScanProgress()
        if ordered:
            yield from scan.scan_ordered(self.conn, self.ids, self.start, self.end,
                                         backward=backward, conditions=self.conditions,
                                         deadline=self.deadline, progress=progress)
        else:
            progress.begin(self.start, self.end, False)
            yield from scan.scan_by_stream(self.conn, self.ids, self.start, self.end,
                                           conditions=self.conditions,
                                           deadline=self.deadline)
            progress.done(self.start, self.end)

    def finish(self) -> None:
        """Add what the scans examined to the stats (rows SQLite filtered out included)."""
        p = self._progress
        if p is not None and p.lo < p.hi:
            lines, size = scan.range_counts(self.conn, self.ids, p.lo, p.hi)
            self.stats.lines_scanned += lines
            self.stats.bytes_scanned += size
        self._progress = None

    # -- entries ---------------------------------------------------------------------------
    def entries(self, backward: bool, ordered: bool = True,
                limited: bool = False) -> Iterator[tuple[int, str, Any]]:
        """(ts, line, labels) for every entry the pipeline keeps, in scan order. `labels` has
        `.labels()` (final label set, sorted; do not mutate) and `.categories()`; read them
        before advancing the iterator."""
        plan, stats = self.plan, self.stats
        md_cache: dict[str, dict[str, str]] = {}
        if plan.line_only:
            match = plan.pipeline.match_line
            noop = plan.pipeline.is_noop
            fixed: dict[tuple[int, str | None], _FixedLabels] = {}
            for rows in self.batches(backward, ordered, limited):
                for _id, sid, ts, line, md in rows:
                    if noop or match(line):
                        lab = fixed.get((sid, md))
                        if lab is None:
                            lab = self._fixed(fixed, md_cache, sid, md)
                        stats.post_filter_lines += 1
                        yield ts, line, lab
            return
        pipes: dict[int, Any] = {}
        for rows in self.batches(backward, ordered, limited):
            for _id, sid, ts, line, md in rows:
                sp = pipes.get(sid)
                if sp is None:
                    sp = pipes[sid] = plan.pipeline.for_stream(self.labels[sid])
                sm = None
                if md is not None:
                    sm = md_cache.get(md)
                    if sm is None:
                        sm = _metadata(md_cache, md)
                out = sp.process(ts, line, sm)
                if out is not None:
                    stats.post_filter_lines += 1
                    yield ts, out[0], out[1]

    def _fixed(self, fixed: dict, md_cache: dict, sid: int, md: str | None) -> _FixedLabels:
        sm = _metadata(md_cache, md) if md is not None else None
        lab = fixed[(sid, md)] = _FixedLabels(LabelsBuilder(self.labels[sid], sm))
        if len(fixed) > 100_000:
            fixed.clear()
        return lab


class _Snapshot:
    """One read transaction around a whole evaluation (index, tail and scans see the same
    data); joins a transaction the caller already opened."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.owned = False

    def __enter__(self) -> "_Snapshot":
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN")
            self.owned = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.owned and self.conn.in_transaction:
            self.conn.execute("COMMIT")


def _metadata(cache: dict[str, dict[str, str]], text: str) -> dict[str, str]:
    try:
        value = _decode_md(text)
    except msgspec.DecodeError:
        value = {}
    if len(cache) > 10_000:
        cache.clear()
    cache[text] = value
    return value


def _key_order(row: scan.Row) -> tuple[int, int]:
    return row[2], row[0]


def _batch_starts(total: int, first: int, rest: int) -> Iterator[tuple[int, int]]:
    """[start, end) slices: a small first batch (a limited query often needs no more), then
    bigger ones."""
    i, size = 0, first
    while i < total:
        yield i, min(total, i + size)
        i += size
        size = rest


def _stream_order(row: scan.Row) -> tuple[int, int, int]:
    return row[1], row[2], row[0]


def _utf8_len(line: str) -> int:
    return len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))


# -- FTS prefilter ---------------------------------------------------------------------------

def fts_candidates(conn: sqlite3.Connection, plan: LogPlan, stream_ids: Sequence[int],
                   start: int, end: int,
                   conditions: scan.LineConditions | None = None) -> list[scan.Row] | None:
    """`(id, stream_id, ts)` of every row of the streams and range that can match the plan's
    needles (unordered): index candidates up to the index's high-water mark plus the whole
    unindexed tail. None when the index cannot narrow enough (then scan the range instead)."""
    if not plan.needles or not stream_ids or start >= end:
        return None
    try:
        from storage import fts
    except ImportError:  # the index is optional: queries are exact without it
        return None
    pf = fts.prefilter(conn, [list(c) for c in plan.needles])
    if pf is None:
        return None
    if conditions is None:
        conditions = plan.conditions
    keys = scan.rows_by_ids(conn, pf.ids, stream_ids, start, end, conditions,
                            keys_only=True)
    keys += scan.rows_after_id(conn, pf.high_water, stream_ids, start, end, conditions,
                               keys_only=True)
    return keys


# -- public entry points ---------------------------------------------------------------------

def evaluate_log_query(conn: sqlite3.Connection, tenant: str, query: A.LogQuery, start: int,
                       end: int, *, limit: int = 100, backward: bool = True,
                       interval_ns: int = 0, deadline: float | None = None,
                       categorize: bool = False,
                       stats: QueryStats | None = None) -> list[dict]:
    """The `result` list of a `streams` answer for entries with start <= ts < end."""
    stats = stats if stats is not None else QueryStats()
    started = time.perf_counter()
    plan = compile_log_query(query)
    with _Snapshot(conn):
        kept = _collect(conn, plan, tenant, start, end, limit, backward, interval_ns, deadline,
                        categorize, stats)
    stats.entries_returned += len(kept)
    stats.exec_time += time.perf_counter() - started
    return categorized_result(kept) if categorize else streams_result(kept)


def _collect(conn: sqlite3.Connection, plan: LogPlan, tenant: str, start: int, end: int,
             limit: int, backward: bool, interval_ns: int, deadline: float | None,
             categorize: bool, stats: QueryStats) -> list:
    feed = _Feed(conn, plan, tenant, start, end, stats, deadline)
    kept: list = []
    if limit > 0 and feed.ids:
        entries = feed.entries(backward, True, True)
        last_ts: int | None = None
        last_split: int | None = None
        try:
            for ts, line, labels in entries:
                if interval_ns:
                    split = ts // INTERVAL_SPLIT_NS
                    if split != last_split:
                        last_split, last_ts = split, None
                    if last_ts is not None and (last_ts - ts if backward else ts - last_ts) \
                            < interval_ns:
                        continue
                    last_ts = ts
                if categorize:
                    stream, extra = categorized_labels(labels)
                    kept.append((tuple(sorted(stream.items())), ts, line, extra))
                else:
                    kept.append((tuple(labels.labels().items()), ts, line))
                if len(kept) >= limit:
                    break
        finally:
            entries.close()
            feed.finish()
    return kept


def iter_pipeline(conn: sqlite3.Connection, tenant: str, log_query: A.LogQuery, start_ns: int,
                  end_ns: int, *, stats: QueryStats | None = None, ordered: bool = True,
                  deadline: float | None = None
                  ) -> Iterator[tuple[int, str, dict[str, str]]]:
    """Every entry with start_ns <= ts < end_ns that survives the full pipeline, as
    (ts, line, final labels incl. structured metadata, parsed labels and __error__).

    `ordered=True`: oldest first across all streams. `ordered=False`: stream after stream,
    each oldest first (cheaper: no sorting across streams). The labels dict may be shared
    between entries: do not mutate it. Counts go to `stats` when given."""
    stats = stats if stats is not None else QueryStats()
    plan = compile_log_query(log_query)
    with _Snapshot(conn):
        feed = _Feed(conn, plan, tenant, start_ns, end_ns, stats, deadline)
        entries = feed.entries(False, ordered)
        try:
            for ts, line, labels in entries:
                yield ts, line, labels.labels()
        finally:
            entries.close()
            feed.finish()


def iter_samples(conn: sqlite3.Connection, tenant: str, log_query: A.LogQuery,
                 unwrap: A.Unwrap, start_ns: int, end_ns: int, *,
                 stats: QueryStats | None = None, ordered: bool = True,
                 deadline: float | None = None
                 ) -> Iterator[tuple[int, float, dict[str, str]]]:
    """For `... | unwrap x [| post filters]`: (ts, value, labels) per entry that yields a
    sample (logql.md §5.9). A failed conversion gives value 0.0 and labels carrying
    `__error__="SampleExtractionErr"` and `__error_details__` (unless a post filter dropped
    it); the unwrapped label is not in the labels."""
    stats = stats if stats is not None else QueryStats()
    stage = compile_unwrap(unwrap)
    plan = compile_log_query(log_query)
    extract: Callable = stage.extract
    with _Snapshot(conn):
        feed = _Feed(conn, plan, tenant, start_ns, end_ns, stats, deadline)
        entries = feed.entries(False, ordered)
        try:
            for ts, line, labels in entries:
                if isinstance(labels, _FixedLabels):
                    # shared labels of a line-only pipeline: give unwrap its own builder
                    builder = LabelsBuilder(labels.labels())
                else:
                    builder = labels
                value = extract(ts, line, builder)
                if value is not None:
                    yield ts, value, builder.labels()
        finally:
            entries.close()
            feed.finish()


def select_streams(conn: sqlite3.Connection, tenant: str, query: A.LogQuery, start: int,
                   end: int) -> dict[int, dict[str, str]]:
    """Stream id -> stream labels (sorted) for the query's selector and range."""
    ids = select_stream_ids(conn, tenant, compile_log_query(query).matchers, start, end)
    raw = stream_label_sets(conn, ids, tenant)
    return {sid: dict(sorted(raw[sid].items())) for sid in ids}
