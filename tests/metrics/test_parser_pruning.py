"""Parsers extract only the labels a range aggregation `by (...)` reads (as Loki's do): the
answers are the same as with every key extracted."""

from __future__ import annotations

import random

import pytest

import logql.engine.range as range_engine
from logql import parse_expr
from logql.plan import labels_read_after
from tests.helpers import JSON_HEADERS, push_body

T0 = 1_700_000_000 * 10**9
S = 10**9


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, storage_state):
    from tests.conftest import matrix_client
    rnd = random.Random(7)
    with matrix_client(tmp_path_factory.mktemp("prune") / "data",
                       {"limits_config": {"reject_old_samples": False}},
                       storage_state) as client:
        for stream in ({"app": "a"}, {"app": "a", "host": "stream-host"}, {"app": "b"}):
            values = []
            for i in range(400):
                host = rnd.choice(["h1", "h2", "h3"])
                latency = rnd.choice([str(rnd.randint(1, 900)), "slow", ""])
                extra = rnd.choice(["", " host=dup", " level=error", " x=1 y=2 z=3"])
                values.append([str(T0 + i * S), f"host={host} latency={latency} "
                                                 f"level={rnd.choice(['info', 'warn'])}{extra}"])
            r = client.post("/logstore/api/v1/push", headers=JSON_HEADERS,
                            content=push_body(stream, values))
            assert r.status_code == 204
        yield client


QUERIES = [
    'quantile_over_time(0.9, {app=~"a|b"} | logfmt | unwrap latency | __error__="" [1m]) '
    'by (host)',
    'max_over_time({app=~"a|b"} | logfmt | level="warn" | unwrap latency | __error__="" [2m]) '
    'by (host, level)',
    'avg_over_time({app="a"} | logfmt | unwrap latency | __error__="" | latency > 100 [1m]) '
    'by (app)',
    'quantile_over_time(0.5, {app="a"} | logfmt | unwrap latency [1m]) by (host)',
]


def answer(client, query: str):
    r = client.get("/logstore/api/v1/query_range", params={
        "query": query, "start": str(T0), "end": str(T0 + 400 * S), "step": "60"})
    return r.status_code, r.json() if r.status_code == 200 else r.text


@pytest.mark.parametrize("query", QUERIES)
def test_pruned_answers_equal_full_extraction(loaded, monkeypatch, query):
    expr = parse_expr(query)
    lr = expr.log_range
    assert labels_read_after(lr.query, lr.unwrap, expr.grouping) is not None  # pruning applies
    pruned = answer(loaded, query)
    monkeypatch.setattr(range_engine, "labels_read_after", lambda *a: None)
    full = answer(loaded, query)
    if pruned[0] == 200:
        pruned[1]["data"].pop("stats")
        full[1]["data"].pop("stats")
        assert pruned == full and pruned[1]["data"]["result"]
    else:
        # the same failure; its series names only the labels that were extracted (Loki's
        # message shows its pruned labels too)
        assert (pruned[0], full[0]) == (400, 400)
        assert pruned[1].split(" for series: ")[0] == full[1].split(" for series: ")[0]
        assert 'host="h' in pruned[1] and ", level=" not in pruned[1]


@pytest.mark.parametrize("query", [
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency [1m])',              # no by
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency [1m]) without (x)',
    'quantile_over_time(0.9, {app="a"} | logfmt | label_format h=host | unwrap latency [1m])'
    ' by (h)',
    'quantile_over_time(0.9, {app="a"} | json | unwrap latency [1m]) by (host)',
])
def test_no_pruning_where_the_labels_read_are_unknown(query):
    expr = parse_expr(query)
    lr = expr.log_range
    assert labels_read_after(lr.query, lr.unwrap, expr.grouping) is None
