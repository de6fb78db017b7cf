"""Exact response bodies of representative log queries (everything but the timing-dependent
numbers in `stats`, which are checked for shape and counts separately)."""

from __future__ import annotations

import json

import pytest

from tests.query.conftest import OLD_DATA, QUERY, QUERY_RANGE, push

T = 1_700_000_000 * 10**9
S = 10**9


def ts(offset_s: float) -> str:
    return str(T + int(offset_s * S))


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from litestar.testing import TestClient

    from app import create_app
    from tests.conftest import make_config

    with TestClient(create_app(make_config(tmp_path_factory.mktemp("golden") / "data",
                                           OLD_DATA))) as c:
        push(c, {"app": "api", "env": "prod"}, [
            [ts(1), "level=info msg=started duration=15ms"],
            [ts(2), 'level=error msg="db timeout" duration=1500ms', {"trace_id": "abc"}],
            [ts(3), "level=warn msg=slow duration=700ms"],
        ])
        push(c, {"app": "web", "env": "prod"}, [
            [ts(1.5), '{"status":200,"path":"/","user":{"id":7}}'],
            [ts(2.5), '{"status":503,"path":"/api","level":"error"}'],
            [ts(3.5), "plain text"],
        ])
        push(c, {"app": "tick"}, [[ts(100 + i), f"tick {i}"] for i in range(10)])
        yield c


def get(client, path=QUERY_RANGE, headers=None, **params) -> dict:
    params.setdefault("start", ts(0))
    params.setdefault("end", ts(200))
    r = client.get(path, params=params, headers=headers or {})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json; charset=UTF-8"
    body = r.json()
    stats = body["data"].pop("stats")
    assert stats["summary"]["totalEntriesReturned"] == sum(
        len(s["values"]) for s in body["data"]["result"])
    return body


def streams(*items) -> dict:
    return {"status": "success", "data": {"resultType": "streams", "result": [
        {"stream": labels, "values": values} for labels, values in items]}}


API = {"app": "api", "env": "prod", "service_name": "api"}
WEB = {"app": "web", "env": "prod", "service_name": "web"}


def test_backward_default_groups_by_final_labels_sorted(client):
    assert get(client, query='{env="prod"}') == streams(
        ({**API, "detected_level": "error", "trace_id": "abc"},
         [[ts(2), 'level=error msg="db timeout" duration=1500ms']]),
        ({**API, "detected_level": "info"}, [[ts(1), "level=info msg=started duration=15ms"]]),
        ({**API, "detected_level": "warn"}, [[ts(3), "level=warn msg=slow duration=700ms"]]),
        ({**WEB, "detected_level": "error"},
         [[ts(2.5), '{"status":503,"path":"/api","level":"error"}']]),
        ({**WEB, "detected_level": "unknown"},
         [[ts(3.5), "plain text"], [ts(1.5), '{"status":200,"path":"/","user":{"id":7}}']]),
    )


def test_limit_takes_newest_across_streams(client):
    assert get(client, query='{env="prod"}', limit="2") == streams(
        ({**API, "detected_level": "warn"}, [[ts(3), "level=warn msg=slow duration=700ms"]]),
        ({**WEB, "detected_level": "unknown"}, [[ts(3.5), "plain text"]]),
    )


def test_forward_takes_oldest_in_ascending_order(client):
    assert get(client, query='{env="prod"}', limit="3", direction="FORWARD") == streams(
        ({**API, "detected_level": "error", "trace_id": "abc"},
         [[ts(2), 'level=error msg="db timeout" duration=1500ms']]),
        ({**API, "detected_level": "info"}, [[ts(1), "level=info msg=started duration=15ms"]]),
        ({**WEB, "detected_level": "unknown"},
         [[ts(1.5), '{"status":200,"path":"/","user":{"id":7}}']]),
    )


def test_logfmt_duration_filter_adds_parsed_labels(client):
    assert get(client, query='{app="api"} | logfmt | duration > 500ms') == streams(
        ({**API, "detected_level": "error", "trace_id": "abc", "level": "error",
          "msg": "db timeout", "duration": "1500ms"},
         [[ts(2), 'level=error msg="db timeout" duration=1500ms']]),
        ({**API, "detected_level": "warn", "level": "warn", "msg": "slow",
          "duration": "700ms"}, [[ts(3), "level=warn msg=slow duration=700ms"]]),
    )


def test_json_flattening_errors_and_line_format(client):
    body = get(client, query='{app="web"} | json | __error__="" '
                             '| line_format "{{.path}} -> {{.status}}"')
    assert body == streams(
        ({**WEB, "detected_level": "error", "status": "503", "path": "/api",
          "level": "error"}, [[ts(2.5), "/api -> 503"]]),
        ({**WEB, "detected_level": "unknown", "status": "200", "path": "/",
          "user_id": "7"}, [[ts(1.5), "/ -> 200"]]),
    )
    body = get(client, query='{app="web"} | json | __error__!="" | drop __error_details__')
    assert body == streams(
        ({**WEB, "detected_level": "unknown", "__error__": "JSONParserErr"},
         [[ts(3.5), "plain text"]]))


def test_label_format_keep_and_structured_metadata_filter(client):
    body = get(client, query='{app="api"} | trace_id="abc" | logfmt '
                             '| label_format who="{{.msg}}!", lvl=level | keep who, lvl')
    assert body == streams(({"lvl": "error", "who": "db timeout!"},
                            [[ts(2), 'level=error msg="db timeout" duration=1500ms']]))


def test_interval_keeps_entries_at_least_interval_apart(client):
    backward = get(client, query='{app="tick"}', interval="3s")
    forward = get(client, query='{app="tick"}', interval="3", direction="forward")
    labels = {"app": "tick", "service_name": "tick", "detected_level": "unknown"}
    assert backward == streams((labels, [[ts(109), "tick 9"], [ts(106), "tick 6"],
                                         [ts(103), "tick 3"], [ts(100), "tick 0"]]))
    assert forward == streams((labels, [[ts(100), "tick 0"], [ts(103), "tick 3"],
                                        [ts(106), "tick 6"], [ts(109), "tick 9"]]))
    # the limit counts kept entries only
    assert get(client, query='{app="tick"}', interval="4s", limit="2") == streams(
        (labels, [[ts(109), "tick 9"], [ts(105), "tick 5"]]))


def test_categorize_labels_flag(client):
    body = get(client, query='{app="api"} | logfmt | level="error"',
               headers={"X-Loki-Response-Encoding-Flags": "categorize-labels"})
    assert body == {"status": "success", "data": {
        "resultType": "streams", "encodingFlags": ["categorize-labels"], "result": [
            {"stream": API, "values": [[
                ts(2), 'level=error msg="db timeout" duration=1500ms',
                {"structuredMetadata": {"detected_level": "error", "trace_id": "abc"},
                 "parsed": {"level": "error", "msg": "db timeout", "duration": "1500ms"}}]]}]}}
    assert list(body["data"]) == ["resultType", "encodingFlags", "result"]


def test_instant_log_query_covers_the_lookback_up_to_time(client):
    r = client.get(QUERY, params={"query": '{app="tick"}', "time": ts(105), "limit": "2"})
    assert r.status_code == 200, r.text
    body = r.json()
    body["data"].pop("stats")
    labels = {"app": "tick", "service_name": "tick", "detected_level": "unknown"}
    assert body == streams((labels, [[ts(105), "tick 5"], [ts(104), "tick 4"]]))


def test_post_form_body_and_time_formats(client):
    form = {"query": '{app="tick"} |= "tick 1"', "start": "2023-11-14T22:14:59Z",
            "end": "1700000200.0", "direction": "forward"}
    r = client.post(QUERY_RANGE, data=form)
    assert r.status_code == 200, r.text
    values = r.json()["data"]["result"][0]["values"]
    assert values == [[ts(101), "tick 1"]]


def test_empty_result_and_field_order(client):
    r = client.get(QUERY_RANGE, params={"query": '{app="nothing"}', "start": ts(0),
                                        "end": ts(200)})
    assert r.status_code == 200
    assert r.text.startswith('{"status":"success","data":{"resultType":"streams","result":[],'
                             '"stats":{"summary":{')


SUMMARY_KEYS = ["bytesProcessedPerSecond", "linesProcessedPerSecond", "totalBytesProcessed",
                "totalLinesProcessed", "execTime", "queueTime", "subqueries",
                "totalEntriesReturned", "splits", "shards", "totalPostFilterLines",
                "totalStructuredMetadataBytesProcessed"]


def test_stats_counts_and_shape(client):
    r = client.get(QUERY_RANGE, params={"query": '{env="prod"} |= "level="', "start": ts(0),
                                        "end": ts(200)},
                   headers={"X-Query-Queue-Time": "1.5s"})
    stats = r.json()["data"]["stats"]
    summary = stats["summary"]
    assert list(summary) == SUMMARY_KEYS
    lines = ["level=info msg=started duration=15ms",
             'level=error msg="db timeout" duration=1500ms',
             "level=warn msg=slow duration=700ms",
             '{"status":200,"path":"/","user":{"id":7}}',
             '{"status":503,"path":"/api","level":"error"}', "plain text"]
    assert summary["totalLinesProcessed"] == 6
    assert summary["totalBytesProcessed"] == sum(len(x) for x in lines)
    assert summary["totalPostFilterLines"] == 3
    assert summary["totalEntriesReturned"] == 3
    assert summary["queueTime"] >= 1.5
    assert summary["execTime"] > 0
    chunk = stats["querier"]["store"]["chunk"]
    assert chunk["decompressedLines"] == 6 and chunk["postFilterLines"] == 3
    assert stats["index"]["totalStreams"] == 2
    assert set(stats) == {"summary", "querier", "ingester", "cache", "index"}
    assert set(stats["cache"]) == {"chunk", "index", "result", "statsResult", "volumeResult",
                                   "seriesResult", "labelResult", "instantMetricResult",
                                   "logResult", "taskResult"}
    assert json.dumps(stats["cache"]["chunk"]) == (
        '{"entriesFound": 0, "entriesRequested": 0, "entriesStored": 0, "bytesReceived": 0, '
        '"bytesSent": 0, "requests": 0, "downloadTime": 0, "queryLengthServed": 0}')
