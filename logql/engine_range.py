"""Range aggregations (spec logql.md §7.1-§7.4): ``count_over_time``, ``rate``, the
``*_over_time`` family over unwrapped values, ``rate_counter``, ``absent_over_time``.

Two ways to get the samples of each window ``(t - offset - range, t - offset]``:

* **Rollups** (``count_over_time``, ``rate``, ``bytes_over_time``, ``bytes_rate`` over a bare
  selector): the windows are cut into buckets at every window edge; whole minutes of a bucket
  come from the per-minute rollups and only the partial minute at an edge is counted from
  the entries, all inside SQLite (``storage.rollups``). No line reaches Python.
* **Scan**: the entries of the selected streams in the covered time range go through the
  log pipeline (planned by ``logql.compile``: SQL line conditions, FTS prefilter, hoisted
  line filters); each surviving line gives one sample at its timestamp, grouped into series,
  and every window is a slice of the series' time-sorted samples.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from typing import Callable

from logql import ast as A
from logql import labels as L
from logql.compile import compile_log_query, compile_unwrap
from logql.engine_common import (
    LabelKey, NS, ScanStats, StepVectors, pipeline_error,
)
from logql.engine_functions import RANGE_FUNCTIONS
from logql.filters import PipelineError
from logql.labels import LabelsBuilder
from services.errors import PlainError
from storage import rollups
from storage.scan import rows_after_id, rows_by_ids, scan_by_stream
from storage.streams import select_stream_ids, stream_label_sets

MINUTE_NS = rollups.MINUTE_NS
ROLLUP_OPS = frozenset(("count_over_time", "rate", "bytes_over_time", "bytes_rate"))
BYTES_OPS = frozenset(("bytes_over_time", "bytes_rate"))
COUNT_OPS = frozenset(("count_over_time", "absent_over_time"))
_PARSERS = (A.JsonParser, A.LogfmtParser, A.RegexpParser, A.PatternParser, A.UnpackParser)


def eval_range_aggregation(conn, tenant: str, node: A.RangeAggregation, steps: list[int],
                           stats: ScanStats) -> StepVectors:
    lr = node.log_range
    op = node.op
    windows = [(t - lr.offset_ns - lr.range_ns, t - lr.offset_ns) for t in steps]
    query = _drop_unread_line_formats(lr.query, op)
    if op == "absent_over_time":
        counts = _samples_or_rollups(conn, tenant, query, lr, "count_over_time", None,
                                     windows, stats, None)
        labels = _absent_labels(lr.query.selector)
        return [{} if vec else {labels: 1.0} for vec in counts]
    return _samples_or_rollups(conn, tenant, query, lr, op, node.grouping, windows, stats,
                               node.param)


def _samples_or_rollups(conn, tenant, query: A.LogQuery, lr: A.LogRange, op: str, grouping,
                        windows, stats: ScanStats, param) -> StepVectors:
    if op in ROLLUP_OPS and lr.unwrap is None and not query.stages:
        return _from_rollups(conn, tenant, query, op, windows, lr.range_ns, stats)
    series = _scan_samples(conn, tenant, query, lr, op, grouping, windows, stats)
    fn = RANGE_FUNCTIONS[op]
    range_s = lr.range_ns / NS
    out: StepVectors = [{} for _ in windows]
    errors: list[LabelKey] = []
    for key in sorted(series):
        ts, values = series[key]
        present = False
        for k, (lo, hi) in enumerate(windows):
            i = bisect_right(ts, lo)
            j = bisect_right(ts, hi)
            if j > i:
                out[k][key] = fn(values, ts, i, j, lo, hi, range_s, param)
                present = True
        if present and _has_error(key):
            errors.append(key)
    if errors:
        key = errors[0]
        raise pipeline_error(dict(key)[L.ERROR], key)
    return out


def _has_error(key: LabelKey) -> bool:
    names = [k for k, _ in key]
    return L.ERROR in names and L.PRESERVE_ERROR not in names


# ----------------------------------------------------------------------------- scanning

def _scan_samples(conn, tenant, query: A.LogQuery, lr: A.LogRange, op: str, grouping,
                  windows, stats: ScanStats) -> dict[LabelKey, tuple[list[int], list]]:
    """Samples per series: ``key -> (sorted timestamps, values)``; values are None for the
    count-like functions (every sample is worth 1)."""
    try:
        plan = compile_log_query(query)
        unwrap = compile_unwrap(lr.unwrap) if lr.unwrap is not None else None
    except PipelineError as exc:
        raise PlainError(400, str(exc)) from None
    lo = min(w[0] for w in windows)
    hi = max(w[1] for w in windows)
    start, end = lo + 1, hi + 1          # storage ranges are [start, end)
    sids = select_stream_ids(conn, tenant, plan.matchers, start, hi)
    if not sids:
        return {}
    label_sets = stream_label_sets(conn, sids, tenant)
    pipeline = plan.pipeline
    stream_pipes = {sid: pipeline.for_stream(label_sets[sid]) for sid in sids}
    key_of = _series_key_fn(grouping)
    want_bytes = op in BYTES_OPS
    count_only = op in COUNT_OPS or (op == "rate" and unwrap is None)
    line_only = pipeline.line_only and unwrap is None
    md_cache: dict[str, list] = {}
    fast_keys: dict[tuple[int, str | None], LabelKey] = {}
    series: dict[LabelKey, tuple[list[int], list]] = {}
    unsorted: set[LabelKey] = set()
    last_sid: dict[LabelKey, int] = {}
    lines = size = kept = 0
    conditions = plan.conditions_for(label_sets.values())
    for rows in _rows(conn, plan, sids, start, end, conditions):
        for _id, sid, ts, line, md in rows:
            lines += 1
            size += len(line)   # characters: close enough for stats, no encode per line
            sm = None
            if md is not None:
                sm = md_cache.get(md)
                if sm is None:
                    sm = md_cache[md] = list(json.loads(md).items())
            out = stream_pipes[sid].process(ts, line, sm)
            if out is None:
                continue
            new_line, lb = out
            if unwrap is not None:
                value = unwrap.extract(ts, new_line, lb)
                if value is None:
                    continue
            elif want_bytes:
                value = len(new_line.encode("utf-8", "surrogatepass"))
            else:
                value = None
            kept += 1
            if line_only:
                fk = (sid, md)
                key = fast_keys.get(fk)
                if key is None:
                    key = fast_keys[fk] = key_of(lb)
            else:
                key = key_of(lb)
            entry = series.get(key)
            if entry is None:
                entry = series[key] = ([], [])
                last_sid[key] = sid
            elif last_sid[key] != sid:
                unsorted.add(key)
                last_sid[key] = sid
            tsl = entry[0]
            if tsl and ts < tsl[-1]:
                unsorted.add(key)
            tsl.append(ts)
            if not count_only:
                entry[1].append(value)
    stats.lines_processed += lines
    stats.bytes_processed += size
    stats.post_filter_lines += kept
    for key in unsorted:
        tsl, vals = series[key]
        if count_only:
            tsl.sort()
        else:
            order = sorted(range(len(tsl)), key=tsl.__getitem__)
            series[key] = ([tsl[i] for i in order], [vals[i] for i in order])
    return series


def _rows(conn, plan, sids, start: int, end: int, conditions):
    """Row batches ``(id, stream_id, ts, line, metadata)``: through the FTS prefilter when
    the line filters name rare enough literals, else stream by stream."""
    if plan.needles:
        try:
            from storage import fts
            pf = fts.prefilter(conn, plan.needles)
        except Exception:  # index not there (older database): a plain scan is still exact
            pf = None
        if pf is not None:
            yield rows_by_ids(conn, pf.ids, sids, start, end, conditions)
            yield rows_after_id(conn, pf.high_water, sids, start, end, conditions)
            return
    yield from scan_by_stream(conn, sids, start, end, conditions=conditions)


def _series_key_fn(grouping: A.Grouping | None) -> Callable[[LabelsBuilder], LabelKey]:
    if grouping is None:
        return lambda lb: tuple(lb.labels().items())
    names = frozenset(grouping.labels)
    if grouping.without:
        def without(lb: LabelsBuilder) -> LabelKey:
            return tuple((k, v) for k, v in lb.labels().items() if k not in names)
        return without
    ordered = sorted(names)

    def by(lb: LabelsBuilder) -> LabelKey:
        if lb.error is not None:
            # grouping must not hide a pipeline error: keep the full labels (Loki does too)
            return tuple(lb.labels().items())
        out = []
        for n in ordered:
            v = lb.get(n)
            if v:
                out.append((n, v))
        return tuple(out)
    return by


def _drop_unread_line_formats(query: A.LogQuery, op: str) -> A.LogQuery:
    """Loki's optimiser removes a ``line_format`` that no later parser or line filter reads
    (except under ``bytes_*``, which measure the line): its template errors never happen."""
    if op in BYTES_OPS or not any(isinstance(s, A.LineFormat) for s in query.stages):
        return query
    kept = []
    stages = query.stages
    for i, s in enumerate(stages):
        if isinstance(s, A.LineFormat) and not any(
                isinstance(later, (A.LineFilter,) + _PARSERS) for later in stages[i + 1:]):
            continue
        kept.append(s)
    return A.LogQuery(query.selector, tuple(kept))


def _absent_labels(selector: A.StreamSelector) -> LabelKey:
    """Labels of ``absent_over_time``'s sample: each name with exactly one matcher, an
    equality one (spec §7.3)."""
    seen: dict[str, int] = {}
    eq: dict[str, str] = {}
    for m in selector.matchers:
        seen[m.name] = seen.get(m.name, 0) + 1
        if m.op == "=" and m.name not in eq:
            eq[m.name] = m.value
    return tuple(sorted((n, v) for n, v in eq.items() if seen[n] == 1))


# ----------------------------------------------------------------------------- rollups

def _from_rollups(conn, tenant, query: A.LogQuery, op: str, windows, range_ns: int,
                  stats: ScanStats) -> StepVectors:
    """Window totals from rollups + exact edge corrections, without reading lines."""
    stats.used_rollups = True
    lo = windows[0][0]
    hi = windows[-1][1]
    sids = select_stream_ids(conn, tenant, query.selector.matchers, lo + 1, hi)
    out: StepVectors = [{} for _ in windows]
    if not sids:
        return out
    step = windows[1][1] - windows[0][1] if len(windows) > 1 else range_ns
    width = math.gcd(range_ns, step)
    want_bytes = op in BYTES_OPS
    if width % MINUTE_NS == 0 and lo % MINUTE_NS == 0:
        points = list(range(lo, hi + 1, width))
        totals = _grid_totals(conn, sids, points, want_bytes)
    else:
        points = sorted({x for w in windows for x in w})
        totals = _edge_totals(conn, sids, points, want_bytes)
    index = {x: i for i, x in enumerate(points)}
    range_s = range_ns / NS
    keyed: dict[LabelKey, list[int]] = {}
    label_sets = stream_label_sets(conn, sorted({sid for sid, _ in totals}), tenant)
    md_cache: dict[str, list] = {}
    for (sid, md), (lines, sizes) in totals.items():
        stats.lines_processed += sum(lines)
        stats.bytes_processed += sum(sizes)
        values = sizes if want_bytes else lines
        key = _rollup_key(label_sets[sid], md, md_cache)
        acc = keyed.get(key)
        if acc is None:
            keyed[key] = list(values)
        else:
            for i, v in enumerate(values):
                acc[i] += v
    stats.post_filter_lines = stats.lines_processed
    is_rate = op in ("rate", "bytes_rate")
    bounds = [(index[a], index[b]) for a, b in windows]
    for key in sorted(keyed):
        pre = [0]
        run = 0
        for v in keyed[key]:
            run += v
            pre.append(run)
        for k, (ia, ib) in enumerate(bounds):
            total = pre[ib] - pre[ia]
            if total:
                out[k][key] = total / range_s if is_rate else float(total)
    return out


Totals = dict[tuple[int, str], tuple[list[int], list[int]]]


def _new_totals(nb: int):
    totals: Totals = {}

    def add(sid, md, i, n, b, sign=1):
        t = totals.get((sid, md))
        if t is None:
            t = totals[(sid, md)] = ([0] * nb, [0] * nb)
        t[0][i] += sign * n
        t[1][i] += sign * b
    return totals, add


def _grid_totals(conn, sids, points: list[int], want_bytes: bool) -> Totals:
    """Buckets ``(p[i], p[i+1]]`` of an evenly spaced, minute-aligned grid: rollup minutes
    by arithmetic, then the entries exactly on a grid point moved to the bucket they end."""
    nb = len(points) - 1
    totals, add = _new_totals(nb)
    if nb <= 0:
        return totals
    origin, width = points[0], points[1] - points[0]
    for sid, md, i, n, b in rollups.rollup_grid(conn, sids, origin, width, nb):
        add(sid, md, i, n, b)
    _move_edge_entries(conn, sids, points, want_bytes, add, nb)
    return totals


def _move_edge_entries(conn, sids, points, want_bytes, add, nb):
    index = {x: i for i, x in enumerate(points)}
    for sid, md, ts, n, b in rollups.entries_at(conn, sids, points, with_bytes=want_bytes):
        i = index[ts]
        if i > 0:
            add(sid, md, i - 1, n, b)
        if i < nb:
            add(sid, md, i, n, b, -1)


def _edge_totals(conn, sids, points: list[int], want_bytes: bool) -> Totals:
    """Buckets ``(p[i], p[i+1]]`` for arbitrary edges: whole minutes from the rollups, the
    partial minute before each edge from the entries (or every entry, when edges fall
    mid-minute so often that counting each entry once is cheaper)."""
    nb = len(points) - 1
    totals, add = _new_totals(nb)
    if nb <= 0:
        return totals
    span = points[-1] - points[0]
    partial = sum(x % MINUTE_NS for x in points)
    if partial * 2 > span:
        ranges = [(points[i], points[i + 1]) for i in range(nb)]
        for sid, md, i, n, b in rollups.entry_totals(conn, sids, ranges, with_bytes=want_bytes):
            add(sid, md, i, n, b)
        return totals
    floors = [x - x % MINUTE_NS for x in points]
    minute_ranges = [(floors[i], floors[i + 1]) for i in range(nb)]
    for sid, md, i, n, b in rollups.rollup_totals(conn, sids, minute_ranges):
        add(sid, md, i, n, b)
    # entries with floor_minute(x) <= ts <= x sit in the rollups of the bucket x begins but
    # belong to the bucket x ends
    edges = [(f - 1, x) for f, x in zip(floors, points)]
    for sid, md, i, n, b in rollups.entry_totals(conn, sids, edges, with_bytes=want_bytes):
        if i > 0:
            add(sid, md, i - 1, n, b)
        if i < nb:
            add(sid, md, i, n, b, -1)
    return totals


def eval_summed_counts(conn, tenant: str, node: A.VectorAggregation, steps: list[int],
                       stats: ScanStats) -> StepVectors | None:
    """``sum by (stream labels) (count_over_time|bytes_over_time(<selector>[r]))`` straight
    from grouped rollups: the per-(stream, metadata) series are never built. Integer totals
    make the result identical to summing the series. None when the shape does not fit (a
    grouping label missing from some stream could come from structured metadata)."""
    inner = node.expr
    if (node.op != "sum" or node.grouping.without or not isinstance(inner, A.RangeAggregation)
            or inner.op not in ("count_over_time", "bytes_over_time")
            or inner.log_range.unwrap is not None or inner.log_range.query.stages):
        return None
    lr = inner.log_range
    windows = [(t - lr.offset_ns - lr.range_ns, t - lr.offset_ns) for t in steps]
    lo, hi = windows[0][0], windows[-1][1]
    step = windows[1][1] - windows[0][1] if len(windows) > 1 else lr.range_ns
    width = math.gcd(lr.range_ns, step)
    if width % MINUTE_NS or lo % MINUTE_NS:
        return None
    sids = select_stream_ids(conn, tenant, lr.query.selector.matchers, lo + 1, hi)
    label_sets = stream_label_sets(conn, sids, tenant)
    names = sorted(set(node.grouping.labels))
    group_keys: dict[LabelKey, int] = {}
    group_of: dict[int, int] = {}
    for sid in sids:
        labels = label_sets[sid]
        if any(n not in labels for n in names):
            return None
        key = tuple((n, labels[n]) for n in names)
        group_of[sid] = group_keys.setdefault(key, len(group_keys))
    stats.used_rollups = True
    out: StepVectors = [{} for _ in windows]
    if not sids:
        return out
    points = list(range(lo, hi + 1, width))
    nb = len(points) - 1
    want_bytes = inner.op == "bytes_over_time"
    totals, add = _new_totals(nb)
    for grp, i, n, b in rollups.grouped_rollup_grid(conn, group_of, lo, width, nb):
        add(grp, "", i, n, b)
    _move_edge_entries(conn, sids, points, want_bytes,
                       lambda sid, md, i, n, b, sign=1: add(group_of[sid], "", i, n, b, sign),
                       nb)
    keys = {i: k for k, i in group_keys.items()}
    index = {x: i for i, x in enumerate(points)}
    bounds = [(index[a], index[b]) for a, b in windows]
    for grp, (lines, sizes) in sorted(totals.items(), key=lambda kv: keys[kv[0][0]]):
        stats.lines_processed += sum(lines)
        stats.bytes_processed += sum(sizes)
        pre = [0]
        run = 0
        for v in (sizes if want_bytes else lines):
            run += v
            pre.append(run)
        key = keys[grp[0]]
        for k, (ia, ib) in enumerate(bounds):
            total = pre[ib] - pre[ia]
            if total:
                out[k][key] = float(total)
    stats.post_filter_lines = stats.lines_processed
    return out


def _rollup_key(stream: dict[str, str], md: str, cache: dict[str, list]) -> LabelKey:
    if not md:
        return tuple(sorted(stream.items()))
    sm = cache.get(md)
    if sm is None:
        sm = cache[md] = list(json.loads(md).items())
    return tuple(LabelsBuilder(stream, sm).labels().items())


__all__ = ["eval_range_aggregation", "ROLLUP_OPS"]
