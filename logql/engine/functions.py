"""The per-window functions of range aggregations (spec logql.md §7.2).

Every function gets the whole series (``values``, ``ts``: time-sorted samples) and the slice
``[i, j)`` that lies in the window ``(lo, hi]`` (non-empty), plus the range in seconds and the
function parameter. Float arithmetic follows Loki's Go code step by step (plain left-to-right
sums, Welford variance, incremental mean) so results agree to the last digit.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from typing import Callable

NAN = float("nan")
INF = float("inf")


def count_over_time(values, ts, i, j, lo, hi, range_s, param):
    return float(j - i)


def rate(values, ts, i, j, lo, hi, range_s, param):
    if not values:                       # no unwrap: every line counts 1
        return (j - i) / range_s
    return _sum(values, i, j) / range_s


def bytes_over_time(values, ts, i, j, lo, hi, range_s, param):
    return float(_sum(values, i, j))


def bytes_rate(values, ts, i, j, lo, hi, range_s, param):
    return _sum(values, i, j) / range_s


def sum_over_time(values, ts, i, j, lo, hi, range_s, param):
    return float(_sum(values, i, j))


def _sum(values, i, j):
    total = 0.0
    for k in range(i, j):
        total += values[k]
    return total


def mean_of(values, i: int, j: int) -> float:
    """Prometheus' incremental mean of values[i:j] (stays finite where a plain sum would
    overflow, and keeps an infinite mean once one is reached)."""
    mean = 0.0
    count = 0.0
    for k in range(i, j):
        v = values[k]
        count += 1
        if math.isinf(mean):
            if math.isinf(v) and (mean > 0) == (v > 0):
                continue
            if not math.isinf(v) and not math.isnan(v):
                continue
        mean += v / count - mean / count
    return mean


def avg_over_time(values, ts, i, j, lo, hi, range_s, param):
    return mean_of(values, i, j)


def max_over_time(values, ts, i, j, lo, hi, range_s, param):
    best = values[i]
    for k in range(i, j):
        v = values[k]
        if v > best or math.isnan(best):
            best = v
    return best


def min_over_time(values, ts, i, j, lo, hi, range_s, param):
    best = values[i]
    for k in range(i, j):
        v = values[k]
        if v < best or math.isnan(best):
            best = v
    return best


def stdvar_over_time(values, ts, i, j, lo, hi, range_s, param):
    aux = count = mean = 0.0
    for k in range(i, j):
        v = values[k]
        count += 1
        delta = v - mean
        mean += delta / count
        aux += delta * (v - mean)
    return aux / count


def stddev_over_time(values, ts, i, j, lo, hi, range_s, param):
    return math.sqrt(stdvar_over_time(values, ts, i, j, lo, hi, range_s, param))


def quantile(q: float, values: list[float]) -> float:
    """Prometheus/Loki ``quantile``: linear interpolation between the closest ranks."""
    if not values:
        return NAN
    if q < 0:
        return -INF
    if q > 1:
        return INF
    return _ranked(q, sorted(values, key=_nan_first))


def _nan_first(v: float):
    # Go's sort.Float64s puts NaN first
    return (0, 0.0) if math.isnan(v) else (1, v)


def quantile_over_time(values, ts, i, j, lo, hi, range_s, param):
    return quantile(param, values[i:j])


def sliding_quantiles(q: float, values: list[float], spans: list[tuple[int, int]],
                      check: Callable[[], None]) -> list[float | None]:
    """`quantile(q, values[i:j])` for each (i, j) in `spans`, None where the span is empty.

    Windows of a range query overlap (a 10m range at step 1s shares all but a second with
    its neighbour), so one sorted list is kept and only the values entering and leaving are
    moved, instead of sorting every window again. NaN breaks ordered insertion, so a series
    holding one falls back to sorting each window (Go's order, NaN first)."""
    if any(v != v for v in values):
        out_nan: list[float | None] = []
        for n, (i, j) in enumerate(spans):
            if n % 64 == 0:
                check()
            out_nan.append(quantile(q, values[i:j]) if j > i else None)
        return out_nan
    window: list[float] = []
    cur_i = cur_j = 0
    out: list[float | None] = []
    for n, (i, j) in enumerate(spans):
        if n % 64 == 0:
            check()
        if j <= i:
            out.append(None)
            continue
        if i >= cur_i and j >= cur_j and i < cur_j and (i - cur_i) + (j - cur_j) < j - i:
            for v in values[cur_i:i]:
                del window[bisect_left(window, v)]
            for v in values[cur_j:j]:
                insort(window, v)
        else:
            window = sorted(values[i:j])
        cur_i, cur_j = i, j
        out.append(_ranked(q, window))
    return out


def _ranked(q: float, vs: list[float]) -> float:
    if q < 0:
        return -INF
    if q > 1:
        return INF
    n = len(vs)
    rank = q * (n - 1)
    lower = max(0.0, math.floor(rank))
    upper = min(n - 1.0, lower + 1)
    weight = rank - math.floor(rank)
    return vs[int(lower)] * (1 - weight) + vs[int(upper)] * weight


def first_over_time(values, ts, i, j, lo, hi, range_s, param):
    return float(values[i])


def last_over_time(values, ts, i, j, lo, hi, range_s, param):
    return float(values[j - 1])


def rate_counter(values, ts, i, j, lo, hi, range_s, param):
    """Prometheus ``extrapolatedRate`` for counters, as Loki adapts it (spec §7.2)."""
    n = j - i
    if n < 2:
        return 0.0
    first, last = values[i], values[j - 1]
    delta = last - first
    prev = first
    for k in range(i + 1, j):
        v = values[k]
        if v < prev:
            delta += prev
        prev = v
    d_start = (ts[i] - lo) / 1e9
    d_end = (hi - ts[j - 1]) / 1e9
    sampled = (ts[j - 1] - ts[i]) / 1e9
    if sampled == 0:
        return 0.0
    avg_gap = sampled / (n - 1)
    threshold = avg_gap * 1.1
    if d_start >= threshold:
        d_start = avg_gap / 2
    if delta > 0 and first >= 0:
        d_zero = sampled * (first / delta)
        if d_zero < d_start:
            d_start = d_zero
    if d_end >= threshold:
        d_end = avg_gap / 2
    return delta * (sampled + d_start + d_end) / sampled / range_s


RANGE_FUNCTIONS = {
    "count_over_time": count_over_time,
    "absent_over_time": count_over_time,
    "rate": rate,
    "bytes_over_time": bytes_over_time,
    "bytes_rate": bytes_rate,
    "sum_over_time": sum_over_time,
    "avg_over_time": avg_over_time,
    "max_over_time": max_over_time,
    "min_over_time": min_over_time,
    "stdvar_over_time": stdvar_over_time,
    "stddev_over_time": stddev_over_time,
    "quantile_over_time": quantile_over_time,
    "first_over_time": first_over_time,
    "last_over_time": last_over_time,
    "rate_counter": rate_counter,
}
