"""Hypothesis fuzzers through the HTTP layer (issue 15): generated push bodies and LogQL
strings never get a 5xx; a push stores all of its entries (204) or some of them (400 naming
the rest), never an entry it was not sent; LogQL that is huge, deeply nested or builds
enormous regexes is refused with a 400, not a crash."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import JSON_HEADERS, PUSH, db_path, sealed_rows

NS = 10**9
NOW = time.time_ns()
SETTINGS = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

CHARS = st.characters(codec="utf-8")
label_names = st.one_of(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True),
                        st.text(CHARS, max_size=8))
label_values = st.text(CHARS, max_size=30)
timestamps = st.one_of(
    st.integers(NOW - 3600 * NS, NOW).map(str),
    st.integers(-(2**70), 2**70).map(str),
    st.text(CHARS, max_size=25),
    st.integers(0, 2**63))                         # a number, not a string: refused
lines = st.text(CHARS, max_size=200)
metadata = st.dictionaries(label_names, label_values, max_size=3)
entries = st.one_of(st.tuples(timestamps, lines).map(list),
                    st.tuples(timestamps, lines, metadata).map(list))
streams = st.fixed_dictionaries({
    "stream": st.dictionaries(label_names, label_values, max_size=4),
    "values": st.lists(entries, max_size=6)})
bodies = st.fixed_dictionaries({"streams": st.lists(streams, max_size=4)})


def _stored_lines(client) -> list[str]:
    with sqlite3.connect(db_path(client)) as conn:
        return [r[0] for r in conn.execute("SELECT line FROM entries")] + \
            [r[4] for r in sealed_rows(conn)]  # the head's rows and packs


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory):
    from litestar.testing import TestClient

    from app import create_app
    from tests.conftest import make_config
    cfg = make_config(tmp_path_factory.mktemp("fuzz") / "data", {
        "limits_config": {"reject_old_samples": False},
        "storage": {"sealing_enabled": False}})   # every stored line stays in the head
    with TestClient(create_app(cfg)) as client:
        yield client


def test_generated_pushes_are_stored_whole_or_refused_clearly(fuzz_client):
    sent: set[str] = set()

    @given(body=bodies)
    @SETTINGS
    def push(body: dict) -> None:
        for s in body["streams"]:
            for entry in s["values"]:
                sent.add(entry[1])
        r = fuzz_client.post(PUSH, content=json.dumps(body), headers=JSON_HEADERS)
        assert r.status_code in (204, 400, 413, 422), (r.status_code, r.text)
        stored = _stored_lines(fuzz_client)
        assert set(stored) <= sent | {""}, "a line that was never sent was stored"
        if r.status_code == 204:
            for s in body["streams"]:
                for entry in s["values"]:
                    assert entry[1] in stored

    push()


raw_bodies = st.one_of(
    st.binary(max_size=300),
    bodies.map(lambda b: json.dumps(b).encode()).flatmap(
        lambda data: st.integers(0, len(data)).map(lambda n: data[:n])),   # truncated
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(CHARS, max_size=5),
                 lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                     st.sampled_from(["streams", "stream", "values", "x"]), kids, max_size=3),
                 max_leaves=20).map(lambda v: json.dumps(v).encode()))
content_types = st.sampled_from(["application/json", "application/x-protobuf",
                                 "application/json; charset=utf-8"])
encodings = st.sampled_from(["", "gzip", "deflate", "snappy", "br"])


def test_malformed_bodies_never_get_a_server_error(fuzz_client):
    @given(body=raw_bodies, ctype=content_types, encoding=encodings)
    @SETTINGS
    def push(body: bytes, ctype: str, encoding: str) -> None:
        headers = {"Content-Type": ctype}
        if encoding:
            headers["Content-Encoding"] = encoding
        r = fuzz_client.post(PUSH, content=body, headers=headers)
        assert r.status_code < 500, (r.status_code, r.text)

    push()


# -- LogQL -----------------------------------------------------------------------------------

names = st.sampled_from(["app", "job", "level", "__name__", "x"])
ops = st.sampled_from(["=", "!=", "=~", "!~"])
values = st.one_of(st.sampled_from(["a", ".+", "(a|b){1000}", "x{1000}{1000}", "[", "\\",
                                    "a" * 5000, ".*"]), st.text(CHARS, max_size=10))
matchers = st.builds(lambda n, o, v: f"{n}{o}{json.dumps(v)}", names, ops, values)
selectors = st.lists(matchers, min_size=1, max_size=3).map(lambda m: "{" + ",".join(m) + "}")
stages = st.one_of(
    st.builds(lambda o, v: f'{o} {json.dumps(v)}', st.sampled_from(["|=", "!=", "|~", "!~", "|>"]),
              values),
    st.sampled_from(["| json", "| logfmt", "| unpack", '| pattern "<a> <_>"', "| decolorize",
                     '| regexp "(?P<a>.*)"', '| line_format "{{.a}}"', "| drop a",
                     '| label_format b="{{ repeat 100 .a }}"', "| a > 1", '| a =~ "x.*"',
                     '| line_format "{{ printf \\"%099999999d\\" 1 }}"']))
log_queries = st.builds(lambda s, p: s + " " + " ".join(p), selectors,
                        st.lists(stages, max_size=4))
ranges = st.sampled_from(["1m", "5m", "0s", "1y", "-1m", "999999h"])
range_fns = st.sampled_from(["count_over_time", "rate", "bytes_rate", "absent_over_time"])
metric = st.builds(lambda f, q, r: f"{f}({q} [{r}])", range_fns, log_queries, ranges)
aggs = st.sampled_from(["sum", "max", "topk(2,", "count", "avg by (app)("])


def _aggregate(agg: str, inner: str) -> str:
    return f"{agg}{inner})" if agg.endswith("(") or agg.endswith(",") else f"{agg}({inner})"


queries = st.one_of(
    log_queries, metric,
    st.builds(_aggregate, aggs, metric),
    st.builds(lambda a, b, op: f"{a} {op} {b}", metric, metric,
              st.sampled_from(["+", "/", "and", "or", "unless", ">"])),
    st.text(st.sampled_from(list('{}()[]|=~!"`,. 0123456789abcxyz_-+*/<>')), max_size=60),
    st.integers(1, 3000).map(lambda n: "sum(" * n + 'count_over_time({a="b"}[1m])' + ")" * n),
    st.integers(1, 3000).map(lambda n: "(" * n + "1" + ")" * n),
    st.integers(1, 2000).map(lambda n: '{a="b"}' + ' |= "x"' * n))


def test_generated_logql_never_gets_a_server_error(fuzz_client):
    r = fuzz_client.post(PUSH, headers=JSON_HEADERS, content=json.dumps({"streams": [
        {"stream": {"app": "a"}, "values": [[str(NOW - i * NS), f'{{"a": {i}}} level=x a={i}']
                                            for i in range(30)]}]}))
    assert r.status_code == 204

    @given(query=queries, instant=st.booleans())
    @settings(SETTINGS, max_examples=600)
    def ask(query: str, instant: bool) -> None:
        if instant:
            r = fuzz_client.get("/logstore/api/v1/query", params={"query": query,
                                                                 "time": str(NOW)})
        else:
            r = fuzz_client.get("/logstore/api/v1/query_range", params={
                "query": query, "start": str(NOW - 3600 * NS), "end": str(NOW), "step": "60"})
        assert r.status_code in (200, 400), (query[:200], r.status_code, r.text[:300])

    ask()


def test_a_range_of_a_century_at_a_minute_step_counts_without_a_point_per_minute(fuzz_client):
    r = fuzz_client.post(PUSH, headers=JSON_HEADERS, content=json.dumps({"streams": [
        {"stream": {"app": "century"}, "values": [[str(NOW - i * NS), "x"] for i in range(5)]}]}))
    assert r.status_code == 204
    r = fuzz_client.get("/logstore/api/v1/query_range", params={
        "query": 'sum(count_over_time({app="century"}[999999h]))',
        "start": str(NOW - 3600 * NS), "end": str(NOW), "step": "60"})
    assert r.status_code == 200
    assert r.json()["data"]["result"][0]["values"][-1][1] == "5"


@pytest.mark.parametrize("query, want", [
    ('{app="many"} |~ "' + "|".join(f"w{i}x" for i in range(5000)) + '"', ["w4999x here"]),
    ('{app="many"}' + "".join(f' |= "w{i}"' for i in range(2000)), []),
    ('{app="many"}' + "".join(f' != "zz{i}"' for i in range(2000)),
     ["w4999x here", "w7 w8 x", "none"]),
])
def test_thousands_of_filters_are_answered_not_refused_by_sqlite(fuzz_client, query, want):
    # SQLite allows 1000 levels of expression: the line filters it is given are bounded
    fuzz_client.post(PUSH, headers=JSON_HEADERS, content=json.dumps({"streams": [
        {"stream": {"app": "many"}, "values": [[str(NOW), "w4999x here"],
                                               [str(NOW - 1), "w7 w8 x"],
                                               [str(NOW - 2), "none"]]}]}))
    r = fuzz_client.get("/logstore/api/v1/query_range", params={
        "query": query, "start": str(NOW - 3600 * NS), "end": str(NOW + 1)})
    assert r.status_code == 200, r.text
    assert [v[1] for s in r.json()["data"]["result"] for v in s["values"]] == want
