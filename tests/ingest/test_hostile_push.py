"""Hostile push bodies never yield a 500 (issue 15): invalid UTF-8 in lines and labels (made
U+FFFD, as Go's JSON decoder does), timestamps beyond what logstore stores, deeply nested
JSON in a line; and what was accepted reads back."""

from __future__ import annotations

import json

import pytest

from tests.helpers import JSON_HEADERS, PUSH

RANGE = "1677-09-23 to 2262-04-10 in nanoseconds"


@pytest.fixture
def client(make_client):
    return make_client({"limits_config": {"reject_old_samples": False}})


def test_invalid_utf8_becomes_replacement_characters(client):
    body = (b'{"streams":[{"stream":{"app":"x\xff"},"values":[["1700000000000000000",'
            b'"bad \xfe\xff bytes"]]}]}')
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="x\ufffd"}', "start": "1699999999000000000", "end": "1700000001000000000"})
    assert [v[1] for s in r.json()["data"]["result"] for v in s["values"]] == [
        "bad \ufffd\ufffd bytes"]


@pytest.mark.parametrize("ts", ["99999999999999999999999999", "-99999999999999999999",
                                "9223372036854775807", "-9223372036854775808"])
def test_timestamps_out_of_range_are_400(client, ts):
    body = json.dumps({"streams": [{"stream": {"app": "x"}, "values": [[ts, "x"]]}]})
    r = client.post(PUSH, content=body, headers=JSON_HEADERS)
    assert (r.status_code, r.text) == (
        400, f'invalid timestamp "{ts}" at $.streams[0].values[0][0]: '
             f"value out of range ({RANGE})\n")


def test_the_edges_of_the_range_are_stored_and_read(client):
    from logql.model import TS_MIN
    for ts in (TS_MIN,):  # the far end is "too new" for any push (creation_grace_period)
        body = json.dumps({"streams": [{"stream": {"app": "edge"}, "values": [[str(ts), "x"]]}]})
        assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
        rng = {"start": str(ts - 3600 * 10**9), "end": str(ts + 10**9)}
        r = client.get("/logstore/api/v1/query_range", params={"query": '{app="edge"}', **rng})
        assert r.status_code == 200, (ts, r.text)
        assert [s["values"] for s in r.json()["data"]["result"]] == [[[str(ts), "x"]]]


def test_a_metric_query_counts_a_line_at_the_earliest_timestamp(client):
    # issue 23 found it: the window's left edge was clamped to TS_MIN, and (TS_MIN, x]
    # left out the line at TS_MIN that the log query read
    from logql.model import TS_MIN
    body = json.dumps({"streams": [{"stream": {"app": "edge"}, "values": [[str(TS_MIN), "x"]]}]})
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    r = client.get("/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({app="edge"}[5m]))', "time": str(TS_MIN + 10**9)})
    assert r.status_code == 200, r.text
    assert r.json()["data"]["result"][0]["value"][1] == "1"
    r = client.get("/logstore/api/v1/index/stats", params={
        "query": '{app="edge"}', "start": str(TS_MIN), "end": str(TS_MIN + 10**9)})
    assert r.json() == {"streams": 1, "chunks": 1, "entries": 1, "bytes": 1}


def test_deep_json_in_a_line_is_a_parser_error_not_a_crash(client):
    line = "{" * 40000 + "}" * 40000
    body = json.dumps({"streams": [{"stream": {"app": "deep"},
                                    "values": [["1700000000000000000", line]]}]})
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="deep"} | json', "start": "1699999999000000000",
        "end": "1700000001000000000"})
    assert r.status_code == 200
    (stream,) = r.json()["data"]["result"]
    assert stream["stream"]["__error__"] == "JSONParserErr"


def test_protobuf_timestamps_out_of_range(client):
    import snappy

    from proto import push_pb2
    req = push_pb2.PushRequest()
    s = req.streams.add(labels='{app="x"}')
    s.entries.add(line="x").timestamp.seconds = 9_300_000_000
    r = client.post(PUSH, content=snappy.compress(req.SerializeToString()),
                    headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 400 and "value out of range" in r.text


def test_a_snappy_bomb_is_refused_by_its_declared_size_before_inflating(client):
    import snappy
    bomb = snappy.compress(b"\0" * (120 << 20))           # 120 MiB of zeros in ~6 MB
    r = client.post(PUSH, content=bomb, headers={"Content-Type": "application/x-protobuf"})
    assert (r.status_code, r.text) == (
        413, f"request body too large: decompressed message size too large than max "
             f"({120 << 20} vs {100 << 20})\n")


def test_a_gzip_bomb_stops_at_the_default_limit(client):
    import gzip
    bomb = gzip.compress(b"\0" * (101 << 20), 1)          # 101 MiB of zeros in ~100 KB
    r = client.post(PUSH, content=bomb, headers={**JSON_HEADERS, "Content-Encoding": "gzip"})
    assert r.status_code == 413
    assert r.text.startswith("request body too large: decompressed message size too large "
                             f"than max ({(100 << 20) + 1} vs {100 << 20})")


def test_ten_thousand_labels_are_refused_without_echoing_them_all(client):
    labels = {f"l{i}": "v" * 10 for i in range(10_000)}
    body = json.dumps({"streams": [{"stream": labels, "values": [["1700000000000000000", "x"]]}]})
    r = client.post(PUSH, content=body, headers=JSON_HEADERS)
    assert r.status_code == 400 and len(r.text) < 5000
    assert r.text.startswith("entry for stream '{l0=\"vvvvvvvvvv\", l1=\"vvvvvvvvvv\",")
    assert r.text.endswith("... (198922 characters)' has 10000 label names; limit 15\n")


def test_many_bad_streams_give_a_bounded_answer(client):
    streams = [{"stream": {"app": f"a{i}", "x": "y" * 3000}, "values": [["1700000000000000000", "x"]]}
               for i in range(2000)]
    r = client.post(PUSH, content=json.dumps({"streams": streams}), headers=JSON_HEADERS)
    assert r.status_code == 400 and len(r.text) < 20_000
    assert r.text.startswith("1 errors like: stream '{app=\"a0\", ")
    assert r.text.rstrip("\n").endswith("more kinds of error")
