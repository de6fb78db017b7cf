"""Range aggregations over log lines against the naive reference, with entries placed exactly
on window edges (a line at t - range is out, a line at t is in), through every evaluation path:
rollup grid (minute-aligned windows), rollups plus partial minutes (unaligned windows), SQL
counting of every entry (dense unaligned windows), and the pipeline scan (filters)."""

from __future__ import annotations

import random

import pytest

from metrics_helpers import (
    NS, Row, aligned_steps, assert_same, f_count, matrix, query_instant,
    query_range, reference, seconds, vector,
)

T0 = 1_699_999_200 * NS          # a whole hour
MIN = 60 * NS
STREAMS = [{"app": "a"}, {"app": "b", "env": "x"}, {"app": "c", "env": "y"}]


def _rows() -> list[Row]:
    rnd = random.Random(7)
    rows = []
    words = ["ok", "error disk", "ünïcode ✓", "x" * 40, "warn x"]
    for i, labels in enumerate(STREAMS):
        seen = set()
        for k in range(0, 75):
            base = T0 + k * MIN
            # on the minute, just after, just before, on 15 s marks, and anywhere
            for ts in (base, base + 1, base - 1, base + 15 * NS, base + 45 * NS,
                       base + rnd.randrange(MIN)):
                if (k + i) % 4 == 0 and ts == base + 1:
                    continue
                if ts not in seen:
                    seen.add(ts)
                    rows.append(Row(labels, ts, rnd.choice(words) + f" n={k}"))
    return rows


ROWS = _rows()


@pytest.fixture(scope="module")
def loaded(module_client):
    return module_client(ROWS)


def _count(r: Row) -> tuple[tuple, float]:
    return tuple(sorted(r.labels.items())), 1.0


def _bytes(r: Row) -> tuple[tuple, float]:
    return tuple(sorted(r.labels.items())), float(len(r.line.encode()))


def f_sum(s):
    return sum(v for _, v in s)


@pytest.mark.parametrize("step_s,range_m", [(300, 5), (60, 5), (120, 10), (345, 5), (7, 1),
                                            (3600, 60), (90, 3)])
@pytest.mark.parametrize("fn", ["count_over_time", "rate", "bytes_over_time", "bytes_rate"])
def test_unfiltered_matches_reference(loaded, fn, step_s, range_m):
    start, end = T0 + 10 * MIN, T0 + 70 * MIN
    steps = aligned_steps(start, end, step_s * NS)
    r = range_m * MIN
    sample = _bytes if fn.startswith("bytes") else _count
    scale = 1 / (r / NS) if fn in ("rate", "bytes_rate") else 1.0
    want = reference(ROWS, steps, r, lambda s: f_sum(s) * scale, sample=sample)
    got = matrix(query_range(loaded, f'{fn}({{app=~".+"}}[{range_m}m])', start, end, step_s))
    assert_same(got, want)


@pytest.mark.parametrize("query,select,sample", [
    ('count_over_time({app=~".+"} |= "x" [5m])', lambda r: "x" in r.line, _count),
    ('bytes_over_time({env=~".+"} != "error" [5m])', lambda r: "env" in r.labels
     and "error" not in r.line, _bytes),
    ('count_over_time({app="a"} |~ "n=[0-9]+$" [5m])', lambda r: r.labels["app"] == "a",
     _count),
])
@pytest.mark.parametrize("step_s", [300, 345, 60])
def test_filtered_matches_reference(loaded, query, select, sample, step_s):
    start, end = T0 + 10 * MIN, T0 + 70 * MIN
    steps = aligned_steps(start, end, step_s * NS)
    want = reference(ROWS, steps, 5 * MIN, f_sum, select=select, sample=sample)
    assert_same(matrix(query_range(loaded, query, start, end, step_s)), want)


@pytest.mark.parametrize("at", [T0 + 30 * MIN, T0 + 30 * MIN + 1, T0 + 30 * MIN - 1,
                                T0 + 30 * MIN + 123_000_000])
@pytest.mark.parametrize("query", ['count_over_time({app=~".+"}[5m])',
                                   'count_over_time({app=~".+"} |= "" [5m])'])
def test_instant_window_edges(loaded, at, query):
    want = reference(ROWS, [at], 5 * MIN, f_count)
    got = vector(query_instant(loaded, query, at))
    assert got == {k: v[seconds(at)] for k, v in want.items()}


def test_line_exactly_on_window_start_is_out_and_on_end_is_in(loaded):
    # stream a has entries exactly at T0+20m and T0+25m; the window (T0+20m, T0+25m]
    # therefore holds the one at 25m and not the one at 20m
    at = T0 + 25 * MIN
    inside = [r for r in ROWS if r.labels == {"app": "a"} and at - 5 * MIN < r.ts <= at]
    assert any(r.ts == at for r in inside)
    assert not any(r.ts == at - 5 * MIN for r in inside)
    got = vector(query_instant(loaded, 'count_over_time({app="a"}[5m])', at))
    assert got == {(("app", "a"),): float(len(inside))}


@pytest.mark.parametrize("step_s", [300, 345])
def test_offset_shifts_windows_not_timestamps(loaded, step_s):
    start, end = T0 + 20 * MIN, T0 + 70 * MIN
    steps = aligned_steps(start, end, step_s * NS)
    want = reference(ROWS, steps, 5 * MIN, f_count, offset_ns=7 * MIN)
    got = matrix(query_range(loaded, 'count_over_time({app=~".+"}[5m] offset 7m)', start,
                             end, step_s))
    assert_same(got, want)


def test_steps_are_aligned_and_end_inclusive(loaded):
    start, end = T0 + 10 * MIN + 17 * NS, T0 + 20 * MIN + 1
    got = matrix(query_range(loaded, 'count_over_time({app="a"}[1m])', start, end, 60))
    times = sorted(next(iter(got.values())))
    assert times[0] == seconds(T0 + 10 * MIN) and times[-1] == seconds(T0 + 21 * MIN)
    assert len(times) == 12


def test_step_as_duration_and_default(loaded):
    start, end = T0 + 10 * MIN, T0 + 70 * MIN
    a = matrix(query_range(loaded, 'count_over_time({app="a"}[5m])', start, end, "5m"))
    b = matrix(query_range(loaded, 'count_over_time({app="a"}[5m])', start, end, 300))
    assert a == b
    resp = loaded.get("/logstore/api/v1/query_range", params={
        "query": 'count_over_time({app="a"}[5m])', "start": str(start), "end": str(end)})
    times = sorted(next(iter(matrix(resp).values())))
    assert times[1] - times[0] == 14          # 1 h range -> 14 s default step


def test_too_many_points_is_400(loaded):
    resp = query_range(loaded, 'count_over_time({app="a"}[5m])', T0, T0 + 11001 * NS, 1)
    assert resp.status_code == 400
    assert resp.text == ("exceeded maximum resolution of 11,000 points per time series. "
                         "Try increasing the value of the step parameter")


def test_stats_and_limit_ignored(loaded):
    resp = loaded.get("/logstore/api/v1/query_range", params={
        "query": 'count_over_time({app="a"}[5m])', "start": str(T0 + 10 * MIN),
        "end": str(T0 + 20 * MIN), "step": "60", "limit": "1"})
    data = resp.json()["data"]
    assert len(data["result"]) == 1 and len(data["result"][0]["values"]) == 11
    summary = data["stats"]["summary"]
    assert summary["totalLinesProcessed"] > 0
    assert summary["totalEntriesReturned"] == 1


@pytest.mark.parametrize("step_s", [300, 60, 345])
@pytest.mark.parametrize("fn,sample", [("count_over_time", _count), ("bytes_over_time", _bytes)])
@pytest.mark.parametrize("by", ["app", "", "env"])   # env: missing on one stream
def test_sum_by_stream_labels(loaded, step_s, fn, sample, by):
    start, end = T0 + 10 * MIN, T0 + 70 * MIN
    steps = aligned_steps(start, end, step_s * NS)

    def grouped(r):
        _, v = sample(r)
        return tuple((k, val) for k, val in sorted(r.labels.items()) if k == by), v
    want = reference(ROWS, steps, 5 * MIN, f_sum, sample=grouped)
    got = matrix(query_range(loaded, f'sum by ({by}) ({fn}({{app=~".+"}}[5m]))', start, end,
                             step_s))
    assert_same(got, want)
