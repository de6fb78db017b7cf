"""Detected labels, fields and field values (spec/http-api.md section 10): the types Loki
gives, the parsers that found each field, JSON paths, id-like labels left out, limits."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import JSON_HEADERS, PUSH

NOW = time.time_ns() - 60 * 10**9


def push(client, labels: dict, values: list) -> None:
    r = client.post(PUSH, content=json.dumps({"streams": [{"stream": labels,
                                                            "values": values}]}),
                    headers=JSON_HEADERS)
    assert r.status_code == 204, r.text


@pytest.fixture
def client(make_client):
    c = make_client()
    web = [[str(NOW + i), json.dumps({"level": "info", "status": 200 + i % 3,
                                      "latency": f"{i + 1}.5ms", "size": "12 KB",
                                      "ok": i % 2 == 0, "ratio": i / 4,
                                      "user": {"id": i, "name": "bob"}})]
           for i in range(6)]
    push(c, {"app": "web", "pod": "p1", "request": "1234"}, web)
    api = [[str(NOW + 100 + i), f'level=warn msg="slow call" took={i + 1}s attempt={i}',
            {"trace_id": f"t{i}"}] for i in range(4)]
    push(c, {"app": "api", "pod": "p2",
             "request": "4f9c1d2e-8a7b-4c3d-9e8f-0a1b2c3d4e5f"}, api)
    return c


def fields(client, **params) -> dict[str, dict]:
    r = client.get("/logstore/api/v1/detected_fields", params={"query": '{app=~".+"}',
                                                               **params})
    assert r.status_code == 200, r.text
    body = r.json()
    return {f["label"]: f for f in body["fields"]}, body.get("limit")


def test_detected_labels_leave_out_ids(client, make_client):
    r = client.get("/logstore/api/v1/detected_labels", params={"query": '{app=~".+"}'})
    assert r.json() == {"detectedLabels": [{"label": "app", "cardinality": 2},
                                           {"label": "pod", "cardinality": 2},
                                           {"label": "service_name", "cardinality": 2}]}
    # `request` (a number and a UUID: ids) is left out; `pod`, a static label, stays even alone
    r = client.get("/logstore/api/v1/detected_labels", params={"query": '{app="web"}'})
    assert {d["label"] for d in r.json()["detectedLabels"]} == {"app", "pod", "service_name"}


def test_types_parsers_and_paths(client):
    found, limit = fields(client)
    assert limit == 1000
    want = {
        "level": ("string", 2, ["logfmt", "json"], ["level"]),
        "status": ("int", 3, ["json"], ["status"]),
        "latency": ("duration", 6, ["json"], ["latency"]),
        "size": ("bytes", 1, ["json"], ["size"]),
        "ok": ("boolean", 2, ["json"], ["ok"]),
        "ratio": ("float", 6, ["json"], ["ratio"]),
        "user_id": ("int", 6, ["json"], ["user", "id"]),
        "user_name": ("string", 1, ["json"], ["user", "name"]),
        "msg": ("string", 1, ["logfmt"], None),
        "took": ("duration", 4, ["logfmt"], None),
        "attempt": ("int", 4, ["logfmt"], None),
        "trace_id": ("string", 4, [], None),
        "detected_level": ("string", 2, [], None),
    }
    assert set(found) == set(want)
    for name, (kind, cardinality, parsers, path) in want.items():
        f = found[name]
        assert (f["type"], f["cardinality"], sorted(f["parsers"])) == (
            kind, cardinality, sorted(parsers)), name
        assert f.get("jsonPath") == path, name


def test_line_limit_and_field_limit(client):
    found, _ = fields(client, line_limit="2")  # the newest two lines: both from `api`
    assert "status" not in found and "took" in found
    found, limit = fields(client, limit="3")
    assert (len(found), limit) == (3, 3)
    r = client.get("/logstore/api/v1/detected_fields", params={"query": '{app="none"}'})
    assert r.json() == {"fields": []}


def test_query_pipeline_and_errors(client):
    found, _ = fields(client, query='{app="api"} | logfmt | attempt > 1')
    assert found["attempt"]["cardinality"] == 2
    r = client.get("/logstore/api/v1/detected_fields",
                   params={"query": 'count_over_time({app="api"}[1m])'})
    assert (r.status_code, r.text) == (400, "only log queries are supported")
    r = client.get("/logstore/api/v1/detected_fields",
                   params={"query": '{app="api"}', "line_limit": "-1"})
    assert (r.status_code, r.text) == (400, "line_limit must be a positive value")
    r = client.get("/logstore/api/v1/detected_fields",
                   params={"query": '{app="api"}', "line_limit": "10000"})
    assert r.status_code == 400 and r.text.startswith("max entries limit per query exceeded")


def test_field_values(client):
    r = client.get("/loki/api/v1/detected_field/status/values", params={"query": '{app=~".+"}'})
    assert r.json() == {"values": ["200", "201", "202"], "limit": 1000}
    r = client.get("/logstore/api/v1/detected_field/trace_id/values",
                   params={"query": '{app="api"}', "limit": "2"})
    assert r.json()["values"] in (["t2", "t3"], ["t3", "t2"])
    r = client.get("/logstore/api/v1/detected_field/nope/values", params={"query": '{app="api"}'})
    assert r.json() == {"values": []}
