"""Unwrapped range aggregations with by/without, conversions, errors and their filters."""

from __future__ import annotations

import random

import pytest

from metrics_helpers import (
    NS, Row, aligned_steps, assert_same, f_avg, f_first, f_last, f_max, f_min,
    f_quantile, f_stddev, f_stdvar, f_sum, matrix, query_range, reference, vector,
    query_instant, seconds,
)

T0 = 1_699_999_200 * NS
MIN = 60 * NS


def _rows() -> list[Row]:
    rnd = random.Random(3)
    rows = []
    for host in ("h1", "h2"):
        for svc in ("api", "db"):
            labels = {"job": "app", "host": host, "svc": svc}
            for k in range(400):
                ts = T0 + k * 9 * NS + rnd.randrange(NS)
                latency = round(rnd.uniform(0.001, 2.5), 3)
                size = rnd.choice(["10KB", "1.5MiB", "300B"])
                rows.append(Row(labels, ts, f"level=info latency={latency} took={latency}s "
                                            f"size={size} counter={k * 3 + (k // 50) % 2}"))
    return rows


ROWS = _rows()


@pytest.fixture(scope="module")
def loaded(module_client):
    return module_client(ROWS)


def _field(line: str, name: str) -> str:
    for part in line.split():
        k, _, v = part.partition("=")
        if k == name:
            return v
    raise KeyError(name)


def _bytes(text: str) -> float:
    units = {"KB": 1000, "MiB": 1024 * 1024, "B": 1}
    for u in ("MiB", "KB", "B"):
        if text.endswith(u):
            return float(text[:-len(u)]) * units[u]
    raise ValueError(text)


def sample_by(names, field="latency", conv=float):
    def sample(r: Row):
        labels = dict(r.labels)
        labels.update({k: _field(r.line, k) for k in ("level", "latency", "took", "size",
                                                      "counter")})
        value = conv(labels.pop(field))
        if names is None:
            key = labels
        elif names[0] == "without":
            key = {k: v for k, v in labels.items() if k not in names[1]}
        else:
            key = {k: v for k, v in labels.items() if k in names}
        return tuple(sorted(key.items())), value
    return sample


FUNCS = [("sum_over_time", f_sum), ("avg_over_time", f_avg), ("min_over_time", f_min),
         ("max_over_time", f_max), ("stdvar_over_time", f_stdvar),
         ("stddev_over_time", f_stddev), ("first_over_time", f_first),
         ("last_over_time", f_last)]


@pytest.mark.parametrize("fn,ref,grouping", [
    (fn, ref, g) for fn, ref in FUNCS for g in ("", " by (host)", " without (svc, level)")
    if not (fn == "sum_over_time" and g)])      # grouping is a parse error for sum_over_time
def test_unwrap_functions(loaded, fn, ref, grouping):
    start, end = T0 + 5 * MIN, T0 + 60 * MIN
    steps = aligned_steps(start, end, 120 * NS)
    names = None
    if "by" in grouping:
        names = ("host",)
    elif "without" in grouping:
        names = ("without", ("svc", "level"))
    # lines that are not logfmt-only fields: drop the parsed labels other than the unwrapped
    q = (f'{fn}({{job="app"}} | logfmt | drop took, size, counter | unwrap latency [5m])'
         f'{grouping}')

    def sample(r):
        key, value = sample_by(names)(r)
        return tuple(p for p in key if p[0] not in ("took", "size", "counter")), value
    want = reference(ROWS, steps, 5 * MIN, ref, sample=sample)
    assert_same(matrix(query_range(loaded, q, start, end, 120)), want)


@pytest.mark.parametrize("q", [0.5, 0.99, 0.0, 1.0])
def test_quantile_over_time(loaded, q):
    start, end = T0 + 5 * MIN, T0 + 60 * MIN
    steps = aligned_steps(start, end, 300 * NS)
    want = reference(ROWS, steps, 5 * MIN, f_quantile(q), sample=sample_by(("host",)))
    got = matrix(query_range(loaded, f'quantile_over_time({q}, {{job="app"}} | logfmt '
                                     f'| unwrap latency [5m]) by (host)', start, end, 300))
    assert_same(got, want)


@pytest.mark.parametrize("conv,field,parse", [
    ("duration", "took", lambda v: float(v[:-1])),
    ("duration_seconds", "took", lambda v: float(v[:-1])),
    ("bytes", "size", _bytes),
])
def test_conversions(loaded, conv, field, parse):
    start, end = T0 + 5 * MIN, T0 + 60 * MIN
    steps = aligned_steps(start, end, 300 * NS)
    want = reference(ROWS, steps, 5 * MIN, f_max, sample=sample_by(("svc",), field, parse))
    got = matrix(query_range(loaded, f'max_over_time({{job="app"}} | logfmt | unwrap '
                                     f'{conv}({field}) [5m]) by (svc)', start, end, 300))
    assert_same(got, want)


def test_rate_with_unwrap_and_rate_counter(loaded):
    at = T0 + 30 * MIN
    sel = lambda r: r.labels["host"] == "h1" and r.labels["svc"] == "api"  # noqa: E731
    samples = sorted((r.ts, float(_field(r.line, "counter"))) for r in ROWS
                     if sel(r) and at - 5 * MIN < r.ts <= at)
    got = vector(query_instant(loaded, 'sum by (host) (rate({host="h1", svc="api"} | logfmt '
                                       '| unwrap counter [5m]))', at))
    assert got == {(("host", "h1"),): pytest.approx(sum(v for _, v in samples) / 300)}
    # rate_counter: counter resets add the value before the drop; extrapolated to the window
    vals = [v for _, v in samples]
    delta = vals[-1] - vals[0] + sum(vals[i - 1] for i in range(1, len(vals))
                                     if vals[i] < vals[i - 1])
    sampled = (samples[-1][0] - samples[0][0]) / 1e9
    avg_gap = sampled / (len(vals) - 1)
    d_start = (samples[0][0] - (at - 5 * MIN)) / 1e9
    d_end = (at - samples[-1][0]) / 1e9
    d_start = avg_gap / 2 if d_start >= avg_gap * 1.1 else d_start
    d_start = min(d_start, sampled * vals[0] / delta)
    d_end = avg_gap / 2 if d_end >= avg_gap * 1.1 else d_end
    expected = delta * (sampled + d_start + d_end) / sampled / 300
    got = vector(query_instant(loaded, 'rate_counter({host="h1", svc="api"} | logfmt '
                                       '| keep host, counter | unwrap counter [5m])', at))
    assert got == {(("host", "h1"),): pytest.approx(expected, rel=1e-12)}


def test_unwrap_failure_fails_query_unless_filtered(loaded):
    at = T0 + 30 * MIN
    resp = query_instant(loaded, 'sum_over_time({job="app"} | logfmt | unwrap took [5m])', at)
    assert resp.status_code == 400
    assert resp.text.startswith("pipeline error: 'SampleExtractionErr' for series: '{")
    assert "Use a label filter to intentionally skip this error." in resp.text
    ok = query_instant(loaded, 'sum_over_time({job="app"} | logfmt | unwrap took '
                               '| __error__="" [5m])', at)
    assert ok.status_code == 200 and ok.json()["data"]["result"] == []
    # the filter before the unwrap does not help: the error happens at the unwrap
    bad = query_instant(loaded, 'sum_over_time({job="app"} | logfmt | __error__="" '
                                '| unwrap took [5m])', at)
    assert bad.status_code == 400 and "SampleExtractionErr" in bad.text


def test_missing_label_gives_no_sample(loaded):
    at = T0 + 30 * MIN
    resp = query_instant(loaded, 'sum_over_time({job="app"} | logfmt | unwrap nothere [5m])',
                         at)
    assert resp.status_code == 200 and resp.json()["data"]["result"] == []


def test_absent_over_time_with_unwrap_and_selector_labels(loaded):
    at = T0 + 30 * MIN
    assert vector(query_instant(loaded, 'absent_over_time({job="app"} | logfmt '
                                        '| unwrap latency [5m])', at)) == {}
    got = vector(query_instant(loaded, 'absent_over_time({job="app", host=~"x.*", '
                                       'svc="a", svc!="b"}[5m])', at))
    assert got == {(("job", "app"),): 1.0}
    assert seconds(at) == at // NS
    assert len(vector(query_instant(loaded, 'count_over_time({job="app"}[5m])', at))) == 4
