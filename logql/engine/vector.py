"""Vector aggregations and ``label_replace`` (spec logql.md §7.5, §7.7), one step at a time.

Input and output are step vectors (``logql.engine_common``). The order of samples inside a
step is meaningful: ``topk``/``bottomk`` keep the earlier sample on ties (Prometheus' heap
does), and ``sort``/``sort_desc`` results are shown in evaluation order.
"""

from __future__ import annotations

import heapq
import math

from logql.syntax import ast as A
from logql.engine.common import LabelKey, Scalar, StepVectors, go_regexp_expand
from logql.engine.functions import mean_of
from logql.errors import QueryError
from logql.gocompat.regexp import RegexError, compile_full


def group_fn(grouping: A.Grouping):
    """Series labels -> group labels, memoised: the same series recur at every step."""
    names = frozenset(grouping.labels)
    if not grouping.without and not names:
        return lambda key: ()
    memo: dict[LabelKey, LabelKey] = {}
    without = grouping.without

    def group(key: LabelKey) -> LabelKey:
        g = memo.get(key)
        if g is None:
            if without:
                g = tuple(p for p in key if p[0] not in names)
            else:
                g = tuple(p for p in key if p[0] in names)
            memo[key] = g
        return g
    return group


def eval_vector_aggregation(node: A.VectorAggregation, value: Scalar | StepVectors,
                            steps: list[int]) -> StepVectors:
    if isinstance(value, float):
        raise QueryError(f"parse error : unexpected scalar in {node.op} aggregation")
    op = node.op
    group = group_fn(node.grouping)
    if op in ("topk", "bottomk", "approx_topk"):
        k = int(node.param or 0)
        return [_topk(vec, k, group, op == "bottomk") for vec in value]
    if op in ("sort", "sort_desc"):
        desc = op == "sort_desc"
        return [_sort(vec, desc) for vec in value]
    agg = _AGGREGATORS.get(op)
    if agg is None:
        raise QueryError(f"unsupported vector aggregation {op}")
    out: StepVectors = []
    for vec in value:
        groups: dict[LabelKey, list[float]] = {}
        for key, v in vec.items():
            g = group(key)
            vals = groups.get(g)
            if vals is None:
                groups[g] = [v]
            else:
                vals.append(v)
        out.append({g: agg(vals) for g, vals in groups.items()})
    return out


def _sum(vals: list[float]) -> float:
    total = 0.0
    for v in vals:
        total += v
    return total


def _avg(vals: list[float]) -> float:
    return mean_of(vals, 0, len(vals))


def _max(vals: list[float]) -> float:
    best = vals[0]
    for v in vals[1:]:
        if best < v or math.isnan(best):
            best = v
    return best


def _min(vals: list[float]) -> float:
    best = vals[0]
    for v in vals[1:]:
        if best > v or math.isnan(best):
            best = v
    return best


def _stdvar(vals: list[float]) -> float:
    count = 0
    mean = value = 0.0
    for v in vals:
        count += 1
        delta = v - mean
        mean += delta / count
        value += delta * (v - mean)
    return value / count


_AGGREGATORS = {
    "sum": _sum,
    "avg": _avg,
    "max": _max,
    "min": _min,
    "count": lambda vals: float(len(vals)),
    "stdvar": _stdvar,
    "stddev": lambda vals: math.sqrt(_stdvar(vals)),
}


def _topk(vec: dict[LabelKey, float], k: int, group, bottom: bool) -> dict[LabelKey, float]:
    """Per group the k largest (smallest) samples with their own labels. A Prometheus-style
    bounded heap: on ties the sample seen first stays; NaN counts as the smallest value
    (largest for ``bottomk``) so that any number replaces it."""
    if k < 1:
        return {}
    heaps: dict[LabelKey, list] = {}
    seq = 0
    for key, v in vec.items():
        seq += 1
        # heap root = the sample to evict first; ties evict the later sample
        if bottom:
            rank = (1 if math.isnan(v) else 0, 0.0 if math.isnan(v) else v)
            item = ((-rank[0], -rank[1]), -seq, key, v)
        else:
            rank = (0 if math.isnan(v) else 1, 0.0 if math.isnan(v) else v)
            item = (rank, -seq, key, v)
        h = heaps.setdefault(group(key), [])
        if len(h) < k:
            heapq.heappush(h, item)
        elif item[0] > h[0][0]:
            heapq.heapreplace(h, item)
    out: dict[LabelKey, float] = {}
    for h in heaps.values():
        # best first, like Prometheus' final sort of each group's heap
        for _rank, _seq, key, v in sorted(h, reverse=True):
            out[key] = v
    return out


def _sort(vec: dict[LabelKey, float], desc: bool) -> dict[LabelKey, float]:
    nums = [(k, v) for k, v in vec.items() if not math.isnan(v)]
    nans = [(k, v) for k, v in vec.items() if math.isnan(v)]
    nums.sort(key=lambda kv: kv[1], reverse=desc)
    return dict(nums + nans)


# ----------------------------------------------------------------------------- label_replace

def eval_label_replace(node: A.LabelReplace, value: Scalar | StepVectors) -> StepVectors:
    if isinstance(value, float):
        raise QueryError("parse error : label_replace needs a vector")
    try:
        regex = compile_full(node.regex, dot_nl=True)  # Prometheus anchors it as ^(?s:re)$
    except RegexError as exc:
        raise QueryError(f"invalid regular expression in label_replace(): {node.regex}: "
                              f"{exc}") from None
    cache: dict[LabelKey, LabelKey] = {}

    def relabel(key: LabelKey) -> LabelKey:
        got = cache.get(key)
        if got is not None:
            return got
        labels = dict(key)
        m = regex.match(labels.get(node.src, ""))
        if m is not None:
            new = go_regexp_expand(node.replacement, m)
            if new:
                labels[node.dst] = new
            else:
                labels.pop(node.dst, None)
        got = cache[key] = tuple(sorted(labels.items()))
        return got

    out: StepVectors = []
    for vec in value:
        step: dict[LabelKey, float] = {}
        for key, v in vec.items():
            new = relabel(key)
            if new in step:
                raise QueryError("vector cannot contain metrics with the same labelset")
            step[new] = v
        out.append(step)
    return out
