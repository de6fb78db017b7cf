"""Pushing hand-made rows, querying over HTTP, and a deliberately naive reference evaluator
for metric queries: it loops over the raw rows written by the test for every window, so it
shares no code (and no cleverness) with the engine under test."""

from __future__ import annotations

import json
import math
from typing import Callable, Iterable

NS = 10**9
QUERY = "/logstore/api/v1/query"
QUERY_RANGE = "/logstore/api/v1/query_range"
# no detected_level / service_name: the rows a test writes are exactly what is stored
PLAIN = {"limits_config": {"reject_old_samples": False, "discover_log_levels": False,
                           "discover_service_name": []}}


class Row:
    __slots__ = ("labels", "ts", "line")

    def __init__(self, labels: dict, ts: int, line: str):
        self.labels, self.ts, self.line = labels, ts, line


def push(client, rows: list[Row]) -> None:
    streams: dict[str, dict] = {}
    for r in rows:
        key = json.dumps(r.labels, sort_keys=True)
        streams.setdefault(key, {"stream": r.labels, "values": []})["values"].append(
            [str(r.ts), r.line])
    body = {"streams": list(streams.values())}
    resp = client.post("/logstore/api/v1/push", content=json.dumps(body),
                       headers={"Content-Type": "application/json"})
    assert resp.status_code == 204, resp.text


def query_range(client, q: str, start: int, end: int, step_s: float | str):
    return client.get(QUERY_RANGE, params={"query": q, "start": str(start), "end": str(end),
                                          "step": str(step_s)})


def query_instant(client, q: str, t: int):
    return client.get(QUERY, params={"query": q, "time": str(t)})


def matrix(resp) -> dict[tuple, dict[float, float]]:
    """{sorted label pairs: {seconds: value}} of a matrix response."""
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    assert data["resultType"] == "matrix"
    return {tuple(sorted(s["metric"].items())): {p[0]: float(p[1]) for p in s["values"]}
            for s in data["result"]}


def vector(resp) -> dict[tuple, float]:
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    assert data["resultType"] == "vector"
    return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in data["result"]}


def aligned_steps(start: int, end: int, step: int) -> list[int]:
    first = start - start % step
    last = end if end % step == 0 else end - end % step + step
    return list(range(first, last + 1, step))


def seconds(t: int) -> float:
    ms = t // 10**6
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def reference(rows: Iterable[Row], steps: list[int], range_ns: int,
              fn: Callable[[list[tuple[int, float]]], float], *, offset_ns: int = 0,
              select: Callable[[Row], bool] = lambda r: True,
              sample: Callable[[Row], tuple[tuple, float] | None] | None = None,
              ) -> dict[tuple, dict[float, float]]:
    """For every step t and series: fn([(ts, value)...]) over rows with
    t - offset - range < ts <= t - offset. `sample(row)` gives (series labels, value) or None;
    the default is (the row's labels, 1)."""
    if sample is None:
        sample = lambda r: (tuple(sorted(r.labels.items())), 1.0)  # noqa: E731
    picked = []
    for r in rows:
        if select(r):
            s = sample(r)
            if s is not None:
                picked.append((r.ts, s[0], s[1]))
    picked.sort(key=lambda p: p[0])
    out: dict[tuple, dict[float, float]] = {}
    for t in steps:
        lo, hi = t - offset_ns - range_ns, t - offset_ns
        per: dict[tuple, list] = {}
        for ts, key, v in picked:
            if lo < ts <= hi:
                per.setdefault(key, []).append((ts, v))
        for key, samples in per.items():
            out.setdefault(key, {})[seconds(t)] = fn(samples)
    return out


def close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want), (sorted(got), sorted(want))
    for key in want:
        g, w = got[key], want[key]
        assert set(g) == set(w), (key, sorted(set(g) ^ set(w))[:5])
        bad = [(t, g[t], w[t]) for t in w if not close(g[t], w[t])]
        assert not bad, (key, bad[:5])


# straightforward versions of the range functions
def f_count(s): return float(len(s))
def f_sum(s): return sum(v for _, v in s)
def f_avg(s): return sum(v for _, v in s) / len(s)
def f_min(s): return min(v for _, v in s)
def f_max(s): return max(v for _, v in s)
def f_first(s): return s[0][1]
def f_last(s): return s[-1][1]


def f_stdvar(s):
    vals = [v for _, v in s]
    mean = sum(vals) / len(vals)
    return sum((v - mean) ** 2 for v in vals) / len(vals)


def f_stddev(s): return math.sqrt(f_stdvar(s))


def f_quantile(q):
    def fn(s):
        vals = sorted(v for _, v in s)
        rank = q * (len(vals) - 1)
        lo = math.floor(rank)
        hi = min(lo + 1, len(vals) - 1)
        return vals[lo] + (vals[hi] - vals[lo]) * (rank - lo)
    return fn
