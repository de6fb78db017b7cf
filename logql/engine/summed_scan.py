"""``sum by (stream labels) (count_over_time(<selector> |= ... [r]))`` counted per group.

The general path (logql/engine/range.py `_scan_samples`) keeps a series per stream and
metadata set, runs each line through a per-stream pipeline with a labels builder, looks up
every series in every window and then sums the series per group: with 20,000 streams of a
few matching lines each, that per-series work was most of the query. When the pipeline only
filters lines and every grouping label is a label of every stream, a line's group is its
stream's, so the lines' timestamps are gathered per group and each window counted once per
group. Counts are integers: their sum is the same float whatever the order it is taken in.

Only for the root of a query: the order of the groups inside a step then never shows (the
result is sorted by labels), while an enclosing `topk`, `sort` or `avg` could see it.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from logql.syntax import ast as A
from logql.pipeline import builder as L
from logql.plan import compile_log_query, labels_read_after
from logql.engine.common import StepVectors, stream_groups
from logql.engine.results import QueryStats
from logql.reading import Reader, utf8_len

_ERRORS = (L.ERROR, L.ERROR_DETAILS)


def eval_summed_scan_counts(reader: Reader, tenant: Any, node: A.VectorAggregation,
                            steps: list[int], stats: QueryStats) -> StepVectors | None:
    """The step vectors of `node`, or None when its shape does not fit (then the general
    path evaluates it, with the same result)."""
    inner = node.expr
    if (node.op != "sum" or node.grouping.without or not isinstance(inner, A.RangeAggregation)
            or inner.op != "count_over_time" or inner.grouping is not None
            or inner.log_range.unwrap is not None or not inner.log_range.query.stages):
        return None
    names = sorted(set(node.grouping.labels))
    if any(n in _ERRORS for n in names):
        return None
    lr = inner.log_range
    query = lr.query
    plan = compile_log_query(query, labels_read_after(query, None, None))
    pipeline = plan.pipeline
    if not pipeline.line_only or plan.label_values:
        return None   # parsers may add labels or errors a group would have to see
    windows = [(t - lr.offset_ns - lr.range_ns, t - lr.offset_ns) for t in steps]
    lo = min(w[0] for w in windows)
    hi = max(w[1] for w in windows)
    found = reader.select_stream_groups(tenant, plan.matchers, lo + 1, hi, names)
    grouped = stream_groups(found, names)
    if grouped is None:
        return None
    group_keys, group_of = grouped
    stamps: list[list[int]] = [[] for _ in group_keys]
    lines = size = kept = 0
    if found:
        # a metadata `__error__` makes its lines' series an error (the general path raises)
        md_errors: dict[str, bool] = {}
        match = pipeline.match_line
        scan = reader.lines(list(found), lo + 1, hi + 1, conditions=plan.conditions,
                            needles=plan.needles, ordered=False)
        for rows in scan.batches():
            reader.check_deadline()
            for _id, sid, ts, line, md in rows:
                lines += 1
                size += utf8_len(line)
                if not match(line):
                    continue
                if md is not None:
                    bad = md_errors.get(md)
                    if bad is None:
                        bad = md_errors[md] = f'"{L.ERROR}"' in md
                    if bad:
                        return None
                kept += 1
                stamps[group_of[sid]].append(ts)
    stats.lines_scanned += lines
    stats.bytes_scanned += size
    stats.post_filter_lines += kept
    out: StepVectors = [{} for _ in windows]
    for key, grp in sorted(group_keys.items()):
        reader.check_deadline()
        ts = stamps[grp]
        if not ts:
            continue
        ts.sort()
        for k, (a, b) in enumerate(windows):
            n = bisect_right(ts, b) - bisect_right(ts, a)
            if n:
                out[k][key] = float(n)
    return out


__all__ = ["eval_summed_scan_counts"]
