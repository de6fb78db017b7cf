"""The logfmt unwrap shortcut (logql/engine/unwrap_scan.py) gives the general path's answer:
line by line on lines made to trip it, and query by query through a real server."""

from __future__ import annotations

import random

import pytest

import logql.engine.range as range_engine
from logql import parse_expr
from logql.engine.range import _series_key_fn
from logql.engine.unwrap_scan import DROPPED, LogfmtUnwrapScan
from logql.plan import compile_log_query, compile_unwrap, labels_read_after
from tests.helpers import JSON_HEADERS, push_body

T0 = 1_700_000_000 * 10**9
S = 10**9

TRICKY = [
    "latency_ms=12.5",
    "ts=1 level=info latency_ms=12.5 msg=\"ok\"",
    "latency_ms= latency_ms=7",                   # an empty first value is skipped
    "latency_ms latency_ms=8",                    # a bare key is skipped
    "msg=\"a latency_ms=1 b\" latency_ms=2",      # inside quotes is not a pair
    "latency-ms=3 latency_ms=4",                  # latency-ms sanitises to latency_ms: first
    "latency.ms=5",
    "xlatency_ms=6 latency_ms=9",
    "latency_ms=1=2 latency_ms=3",                # a broken pair, skipped by the scanner
    "latency_ms=\"10\"",                          # quoted value
    "latency_ms=1e3", "latency_ms=inf", "latency_ms=NaN", "latency_ms=0x10",
    "latency_ms=1_000", "latency_ms=-0", "latency_ms=007", "latency_ms=5.",
    "latency_ms=.5", "latency_ms=" + "9" * 400, "latency_ms=slow",
    "a=\"unterminated latency_ms=3",
    "\tlatency_ms=11\t", "k=v\x01latency_ms=12",
    "é=1 latency_ms=13", "k=\ufffd latency_ms=14",
    "latency_ms=15 latency_ms=16",
    "__error__=x latency_ms=20", "latency_ms=21 __error__=y", "latency_ms=22 ..error..=z",
    "9key=1 latency_ms=17", "_k=1 latency_ms=18", "k= latency_ms=19",
    "",
    "no pairs here at all",
]


def _general(query: str, stream: dict[str, str], line: str, sm=None):
    expr = parse_expr(query)
    lr = expr.log_range
    only = labels_read_after(lr.query, lr.unwrap, expr.grouping)
    plan = compile_log_query(lr.query, only)
    unwrap = compile_unwrap(lr.unwrap)
    out = plan.pipeline.for_stream(stream).process(0, line, sm)
    if out is None:
        return "dropped"
    new_line, lb = out
    value = unwrap.extract(0, new_line, lb)
    return value, lb.error, _series_key_fn(expr.grouping)(lb)


def _shortcut(query: str):
    expr = parse_expr(query)
    lr = expr.log_range
    only = labels_read_after(lr.query, lr.unwrap, expr.grouping)
    plan = compile_log_query(lr.query, only)
    return LogfmtUnwrapScan.for_plan(plan.pipeline, compile_unwrap(lr.unwrap), only), expr


@pytest.mark.parametrize("query", [
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms [1m]) by (host)',
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms | __error__="" [1m]) '
    'by (host)',
])
def test_the_shortcut_reads_every_line_as_the_parser_does(query):
    shortcut, expr = _shortcut(query)
    assert shortcut is not None
    stream = {"app": "a", "host": "h1"}
    key = shortcut.key_for(stream, None, _series_key_fn(expr.grouping))
    assert key == (("host", "h1"),)
    rnd = random.Random(3)
    lines = TRICKY + [" ".join(rnd.sample(TRICKY, 3)) for _ in range(300)]
    taken = 0
    for line in lines:
        value = shortcut.value(line)
        if value is None:
            continue
        taken += 1
        general = _general(query, stream, line)
        assert general != "dropped", line
        assert (value, None, key) == general, line
    assert taken >= 60  # the shortcut was really taken, on many shapes


def test_line_filters_before_the_parser_drop_the_same_lines():
    query = ('quantile_over_time(0.9, {app="a"} |= "GET" != "health" | logfmt '
             '| unwrap latency_ms [1m]) by (host)')
    shortcut, _ = _shortcut(query)
    assert shortcut is not None
    stream = {"app": "a", "host": "h1"}
    for line in ["method=GET latency_ms=3", "method=POST latency_ms=3",
                 "method=GET path=/health latency_ms=3"]:
        value = shortcut.value(line)
        general = _general(query, stream, line)
        assert (value is DROPPED) == (general == "dropped"), line
        if value is not DROPPED:
            assert general[0] == value


@pytest.mark.parametrize("query", [
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms [1m])',          # no by
    'quantile_over_time(0.9, {app="a"} | logfmt --strict | unwrap latency_ms [1m]) by (host)',
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap duration(latency_ms) [1m]) by (host)',
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms | __error__="" | x > 1 [1m]) '
    'by (host)',
    'quantile_over_time(0.9, {app="a"} | logfmt | level="x" | unwrap latency_ms [1m]) by (host)',
    'quantile_over_time(0.9, {app="a"} | json | unwrap latency_ms [1m]) by (host)',
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap _1ms [1m]) by (host)',
])
def test_other_shapes_keep_the_general_path(query):
    assert _shortcut(query)[0] is None


def test_a_label_the_line_could_set_keeps_the_general_path():
    shortcut, expr = _shortcut(
        'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms [1m]) by (host)')
    key_of = _series_key_fn(expr.grouping)
    assert shortcut.key_for({"app": "a"}, None, key_of) is None               # host from line
    assert shortcut.key_for({"app": "a"}, [("host", "m")], key_of) == (("host", "m"),)
    assert shortcut.key_for({"app": "a", "latency_ms": "1", "host": "h"}, None, key_of) is None


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, storage_state):
    from tests.conftest import matrix_client
    rnd = random.Random(11)
    with matrix_client(tmp_path_factory.mktemp("unwrap-scan") / "data",
                       # the paths are swapped in this process: the queries run here
                       {"limits_config": {"reject_old_samples": False},
                        "querier": {"worker_processes": 0}},
                       storage_state) as client:
        for stream in ({"app": "a", "host": "h1"}, {"app": "a", "host": "h2"}, {"app": "a"}):
            values = []
            for i in range(300):
                line = rnd.choice(TRICKY) if i % 5 == 0 else (
                    f"ts={i} level={rnd.choice(['info', 'warn'])} host=line-{i % 3} "
                    f"latency_ms={rnd.randint(1, 900)}.{rnd.randint(0, 99)} msg=\"ok\"")
                values.append([str(T0 + i * S), line])
            r = client.post("/logstore/api/v1/push", headers=JSON_HEADERS,
                            content=push_body(stream, values))
            assert r.status_code == 204
        yield client


QUERIES = [
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms | __error__="" [1m]) '
    'by (host)',
    'max_over_time({app="a"} |= "level=info" | logfmt | unwrap latency_ms | __error__="" [2m])'
    ' by (host, app)',
    'avg_over_time({app="a"} | logfmt | unwrap latency_ms [1m]) by (host)',  # errors: 400
]


def _answer(client, query: str):
    r = client.get("/logstore/api/v1/query_range", params={
        "query": query, "start": str(T0), "end": str(T0 + 300 * S), "step": "60"})
    return r.status_code, r.json() if r.status_code == 200 else r.text


@pytest.mark.parametrize("query", QUERIES)
def test_answers_equal_the_general_path(loaded, monkeypatch, query):
    taken = []
    real_value = LogfmtUnwrapScan.value
    real_columns = LogfmtUnwrapScan.column_samples

    def counted(self, line):
        value = real_value(self, line)
        if value is not None:
            taken.append(value)
        return value

    def counted_columns(self, lc):
        took, values = real_columns(self, lc)
        taken.extend(values[took].tolist())
        return took, values

    monkeypatch.setattr(LogfmtUnwrapScan, "value", counted)
    monkeypatch.setattr(LogfmtUnwrapScan, "column_samples", counted_columns)
    fast = _answer(loaded, query)
    assert len(taken) > 100  # the shortcut answered most lines (row by row, or by columns)
    monkeypatch.setattr(range_engine.LogfmtUnwrapScan, "for_plan",
                        classmethod(lambda cls, *a: None))
    general = _answer(loaded, query)
    if fast[0] == 200:
        fast[1]["data"].pop("stats")
        general[1]["data"].pop("stats")
    assert fast == general
