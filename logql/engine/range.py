"""Range aggregations (spec logql.md §7.1-§7.4): ``count_over_time``, ``rate``, the
``*_over_time`` family over unwrapped values, ``rate_counter``, ``absent_over_time``.

Two ways to get the samples of each window ``(t - offset - range, t - offset]``:

* **Rollups** (``count_over_time``, ``rate``, ``bytes_over_time``, ``bytes_rate`` over a bare
  selector): the windows are cut into buckets at every window edge and the reader counts
  each bucket (``Reader.window_counts``; the SQLite one from its per-minute rollups, with
  the partial minute at an edge counted from the entries). No line reaches Python.
* **Scan**: the entries of the selected streams in the covered time range go through the
  log pipeline (planned by ``logql.compile``: SQL line conditions, FTS prefilter, hoisted
  line filters); each surviving line gives one sample at its timestamp, grouped into series,
  and every window is a slice of the series' time-sorted samples.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from operator import itemgetter
from typing import Any, Callable

import msgspec

from logql.syntax import ast as A
from logql.pipeline import builder as L
from logql.plan import compile_log_query, compile_unwrap, labels_read_after
from logql.engine.common import LabelKey, NS, StepVectors, pipeline_error, stream_groups
from logql.engine.functions import RANGE_FUNCTIONS, sliding_quantiles
from logql.pipeline.builder import LabelsBuilder
from logql.engine.results import QueryStats
from logql.engine.unwrap_columns import scan_columns, window_quantiles
from logql.engine.unwrap_scan import DROPPED, LogfmtUnwrapScan
from logql.reading import Reader, utf8_len

_decode_md = msgspec.json.Decoder(dict[str, str]).decode
MD_CACHE_MAX = 10_000
_UNSET = object()
ROLLUP_OPS = frozenset(("count_over_time", "rate", "bytes_over_time", "bytes_rate"))
BYTES_OPS = frozenset(("bytes_over_time", "bytes_rate"))
COUNT_OPS = frozenset(("count_over_time", "absent_over_time"))
_PARSERS = (A.JsonParser, A.LogfmtParser, A.RegexpParser, A.PatternParser, A.UnpackParser)


def eval_range_aggregation(reader: Reader, tenant: Any, node: A.RangeAggregation,
                           steps: list[int], stats: QueryStats) -> StepVectors:
    lr = node.log_range
    op = node.op
    windows = [(t - lr.offset_ns - lr.range_ns, t - lr.offset_ns) for t in steps]
    query = _drop_unread_line_formats(lr.query, op)
    if op == "absent_over_time":
        counts = _samples_or_rollups(reader, tenant, query, lr, "count_over_time", None,
                                     windows, stats, None)
        labels = _absent_labels(lr.query.selector)
        return [{} if vec else {labels: 1.0} for vec in counts]
    return _samples_or_rollups(reader, tenant, query, lr, op, node.grouping, windows, stats,
                               node.param)


def _samples_or_rollups(reader: Reader, tenant, query: A.LogQuery, lr: A.LogRange,
                        op: str, grouping, windows, stats: QueryStats, param) -> StepVectors:
    if op in ROLLUP_OPS and lr.unwrap is None and not query.stages:
        return _from_rollups(reader, tenant, query, op, windows, lr.range_ns, stats)
    series = _scan_samples(reader, tenant, query, lr, op, grouping, windows, stats)
    fn = RANGE_FUNCTIONS[op]
    range_s = lr.range_ns / NS
    out: StepVectors = [{} for _ in windows]
    errors: list[LabelKey] = []
    for key in sorted(series):
        reader.check_deadline()
        ts, values = series[key]
        present = False
        if op == "quantile_over_time":
            found = None
            if not isinstance(ts, list):  # arrays, from the column path
                found = window_quantiles(param, ts, values, windows)
                if found is None:
                    ts, values = ts.tolist(), values.tolist()
            if found is None:
                spans = [(bisect_right(ts, lo), bisect_right(ts, hi)) for lo, hi in windows]
                found = sliding_quantiles(param, values, spans, reader.check_deadline)
            for k, value in enumerate(found):
                if value is not None:
                    out[k][key] = value
                    present = True
        else:
            if not isinstance(ts, list):
                ts, values = ts.tolist(), values.tolist()
            for k, (lo, hi) in enumerate(windows):
                if k % 256 == 0:
                    reader.check_deadline()
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

def _scan_samples(reader: Reader, tenant, query: A.LogQuery, lr: A.LogRange, op: str,
                  grouping, windows, stats: QueryStats
                  ) -> dict[LabelKey, tuple[list[int], list]]:
    """Samples per series: ``key -> (sorted timestamps, values)``; values are None for the
    count-like functions (every sample is worth 1)."""
    only = labels_read_after(query, lr.unwrap, grouping)
    plan = compile_log_query(query, only)
    unwrap = compile_unwrap(lr.unwrap) if lr.unwrap is not None else None
    lo = min(w[0] for w in windows)
    hi = max(w[1] for w in windows)
    start, end = lo + 1, hi + 1          # storage ranges are [start, end)
    label_sets = reader.select_streams(tenant, plan.matchers, start, hi)
    sids = list(label_sets)
    if not sids:
        return {}
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

    def add(key: LabelKey, sid: int, ts: int, value) -> None:
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

    def sm_of(md: str | None):
        """A row's structured metadata as pairs, each distinct text parsed once."""
        if md is None:
            return None
        sm = md_cache.get(md)
        if sm is None:
            if len(md_cache) >= MD_CACHE_MAX:
                md_cache.clear()
            sm = md_cache[md] = _metadata_pairs(md)
        return sm

    conditions = plan.conditions_for(label_sets.values())
    shortcut = LogfmtUnwrapScan.for_plan(pipeline, unwrap, only)
    if shortcut is not None and not shortcut.matchers and not plan.needles \
            and (conditions is None or conditions.matcher() is None):
        # no line filter: every row of the range is read, and whole sealed blocks are
        # read as columns (unwrap_columns.py); with one, the row path below lets the
        # reader skip the blocks and lines the filters rule out
        return scan_columns(reader, sids, label_sets, start, end, shortcut, stream_pipes,
                            unwrap, key_of, sm_of, stats)
    # (stream, metadata) -> the series key of the lines the shortcut reads, None: it reads none
    shortcut_keys: dict[tuple[int, str | None], LabelKey | None] = {}
    scan = reader.lines(sids, start, end, conditions=conditions, needles=plan.needles,
                        ordered=False)
    for rows in scan.batches():
        reader.check_deadline()
        for _id, sid, ts, line, md in rows:
            lines += 1
            size += utf8_len(line)
            sm = sm_of(md)
            if shortcut is not None:
                fk = (sid, md)
                key = shortcut_keys.get(fk, _UNSET)
                if key is _UNSET:
                    key = shortcut_keys[fk] = shortcut.key_for(label_sets[sid], sm, key_of)
                if key is not None:
                    value = shortcut.value(line)
                    if value is DROPPED:
                        continue
                    if value is not None:
                        kept += 1
                        add(key, sid, ts, value)
                        continue
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
            add(key, sid, ts, value)
    stats.lines_scanned += lines
    stats.bytes_scanned += size
    stats.post_filter_lines += kept
    for key in unsorted:
        tsl, vals = series[key]
        if count_only:
            tsl.sort()
        else:
            order = sorted(range(len(tsl)), key=tsl.__getitem__)
            series[key] = ([tsl[i] for i in order], [vals[i] for i in order])
    return series


def _metadata_pairs(text: str) -> list[tuple[str, str]]:
    try:
        return list(_decode_md(text).items())
    except msgspec.DecodeError:
        return []


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

GRID_POINTS = 2000


def _small_grid(lo: int, hi: int, width: int, windows: list) -> bool:
    """Whether a uniform grid over [lo, hi] is cheap: up to 2000 points (33 hours of
    minutes), or not much more than the windows' own edges."""
    points = (hi - lo) // width
    return points <= GRID_POINTS or points <= 4 * len(windows) + 4


def eval_summed_rollups(reader: Reader, tenant, node: A.VectorAggregation, steps: list[int],
                        stats: QueryStats, group: Callable[[LabelKey], LabelKey]
                        ) -> StepVectors | None:
    """``sum by|without (...)`` over a range aggregation the rollups answer, summed as the
    series are made: each group's value adds its series' values in the order `sum` over
    the series vectors adds them (sorted labels), so the floats are the same, without a
    vector of 20,000 series per step in between. None when the rollups do not answer it."""
    inner = node.expr
    if node.op != "sum" or not isinstance(inner, A.RangeAggregation) \
            or inner.op not in ROLLUP_OPS or inner.log_range.unwrap is not None:
        return None
    lr = inner.log_range
    query = _drop_unread_line_formats(lr.query, inner.op)
    if query.stages:
        return None
    windows = [(t - lr.offset_ns - lr.range_ns, t - lr.offset_ns) for t in steps]
    return _from_rollups(reader, tenant, query, inner.op, windows, lr.range_ns, stats, group)


def _from_rollups(reader: Reader, tenant, query: A.LogQuery, op: str, windows,
                  range_ns: int, stats: QueryStats,
                  group: Callable[[LabelKey], LabelKey] | None = None) -> StepVectors:
    """Window totals from rollups + exact edge corrections, without reading lines; with
    `group`, summed per group (eval_summed_rollups)."""
    stats.used_rollups = True
    lo = windows[0][0]
    hi = windows[-1][1]
    label_sets = reader.select_streams(tenant, query.selector.matchers, lo + 1, hi)
    out: StepVectors = [{} for _ in windows]
    if not label_sets:
        return out
    step = windows[1][1] - windows[0][1] if len(windows) > 1 else range_ns
    width = math.gcd(range_ns, step)
    want_bytes = op in BYTES_OPS
    # a uniform grid on the reader's granularity serves overlapping windows best, unless
    # the range dwarfs the step ([999999h] at step 1m would be 60 million points): then only
    # the windows' own edges are counted
    grain = reader.count_granularity
    if width % grain == 0 and lo % grain == 0 and _small_grid(lo, hi, width, windows):
        points = list(range(lo, hi + 1, width))
    else:
        points = sorted({x for w in windows for x in w})
    totals = reader.window_counts(list(label_sets), points, want_bytes)
    index = {x: i for i, x in enumerate(points)}
    range_s = range_ns / NS
    keyed: dict[LabelKey, list[int]] = {}
    md_cache: dict[str, tuple] = {}
    counted = size = 0
    for (sid, md), (lines, sizes) in totals.items():
        counted += sum(lines)
        size += sum(sizes)
        values = sizes if want_bytes else lines
        key = _rollup_key(label_sets[sid], md, md_cache)
        acc = keyed.get(key)
        if acc is None:
            keyed[key] = list(values)
        else:
            for i, v in enumerate(values):
                acc[i] += v
    stats.lines_scanned += counted
    stats.bytes_scanned += size
    stats.post_filter_lines += counted
    is_rate = op in ("rate", "bytes_rate")
    bounds = [(index[a], index[b]) for a, b in windows]
    for key in sorted(keyed):
        pre = [0]
        run = 0
        for v in keyed[key]:
            run += v
            pre.append(run)
        if group is None:
            for k, (ia, ib) in enumerate(bounds):
                total = pre[ib] - pre[ia]
                if total:
                    out[k][key] = total / range_s if is_rate else float(total)
            continue
        g = group(key)
        for k, (ia, ib) in enumerate(bounds):
            total = pre[ib] - pre[ia]
            if total:
                vec = out[k]
                vec[g] = vec.get(g, 0.0) + (total / range_s if is_rate else float(total))
    return out


def eval_summed_counts(reader: Reader, tenant, node: A.VectorAggregation,
                       steps: list[int], stats: QueryStats) -> StepVectors | None:
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
    grain = reader.count_granularity
    if width % grain or lo % grain or not _small_grid(lo, hi, width, windows):
        return None   # not a grid grouped_counts takes, or one far larger than the windows
    names = sorted(set(node.grouping.labels))
    found = reader.select_stream_groups(tenant, lr.query.selector.matchers, lo + 1, hi,
                                        names)
    sids = list(found)
    grouped = stream_groups(found, names)
    if grouped is None:
        return None
    group_keys, group_of = grouped
    stats.used_rollups = True
    out: StepVectors = [{} for _ in windows]
    if not sids:
        return out
    points = list(range(lo, hi + 1, width))
    want_bytes = inner.op == "bytes_over_time"
    totals = reader.grouped_counts(group_of, points, want_bytes)
    keys = {i: k for k, i in group_keys.items()}
    index = {x: i for i, x in enumerate(points)}
    bounds = [(index[a], index[b]) for a, b in windows]
    counted = 0
    for grp, (lines, sizes) in sorted(totals.items(), key=lambda kv: keys[kv[0][0]]):
        counted += sum(lines)
        stats.lines_scanned += sum(lines)
        stats.bytes_scanned += sum(sizes)
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
    stats.post_filter_lines += counted
    return out


def _rollup_key(stream: dict[str, str], md: str, cache: dict[str, tuple]) -> LabelKey:
    # names are unique in a key: sorting by name alone sorts the pairs, with cheaper compares
    if not md:
        return tuple(sorted(stream.items(), key=_name))
    found = cache.get(md)
    if found is None:
        sm = _metadata_pairs(md)
        names = frozenset(name for name, _ in sm)
        found = cache[md] = (sm, names, not names.isdisjoint(_SPECIAL))
    sm, names, special = found
    if not special and stream.keys().isdisjoint(names):
        # what the builder gives when no metadata name is special or a stream label's, at a
        # fraction of the cost: a key per stream and metadata set adds up with many streams
        return tuple(sorted([*stream.items(), *sm], key=_name))
    return tuple(LabelsBuilder(stream, sm).labels().items())


_SPECIAL = frozenset((L.ERROR, L.ERROR_DETAILS))
_name = itemgetter(0)


__all__ = ["eval_range_aggregation", "ROLLUP_OPS"]
