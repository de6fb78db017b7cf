"""Multi-tenant reads (http-api.md §16): `X-Scope-OrgID: a|b` with
`querier.multi_tenant_queries_enabled`, the `__tenant_id__` label, and what stays
single-tenant."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlencode

import pytest
import websockets

from tests.helpers import JSON_HEADERS, push_body

NS = 10**9
T0 = (time.time_ns() // (60 * NS) - 10) * 60 * NS  # a whole minute, ten minutes ago
MULTI = {"auth_enabled": True, "querier": {"multi_tenant_queries_enabled": True}}


def org(tenants: str) -> dict:
    return {"X-Scope-OrgID": tenants}


def push(client, tenant: str, labels: dict, lines: list[tuple[int, str]]) -> None:
    r = client.post("/logstore/api/v1/push", headers={**JSON_HEADERS, **org(tenant)},
                    content=push_body(labels, [[str(ts), line] for ts, line in lines]))
    assert r.status_code == 204, r.text


@pytest.fixture
def two(make_client):
    client = make_client(MULTI)
    push(client, "a", {"app": "api"}, [(T0 + NS, "a one"), (T0 + 2 * NS, "a two error")])
    push(client, "b", {"app": "api"}, [(T0 + 3 * NS, "b one error")])
    push(client, "b", {"app": "web", "__tenant_id__": "own"}, [(T0 + 4 * NS, "b web")])
    return client


RANGE = {"start": str(T0), "end": str(T0 + 60 * NS)}


def log_lines(client, query: str, tenants: str = "a|b") -> list[tuple[dict, str]]:
    r = client.get("/logstore/api/v1/query_range", headers=org(tenants),
                   params={"query": query, "direction": "forward", **RANGE})
    assert r.status_code == 200, r.text
    return [(s["stream"], v[1]) for s in r.json()["data"]["result"] for v in s["values"]]


def test_log_query_over_two_tenants(two):
    # streams in label-string order, each oldest first (direction=forward)
    assert log_lines(two, '{app="api"}') == [
        ({"__tenant_id__": "a", "app": "api", "detected_level": "error",
          "service_name": "api"}, "a two error"),
        ({"__tenant_id__": "a", "app": "api", "detected_level": "unknown",
          "service_name": "api"}, "a one"),
        ({"__tenant_id__": "b", "app": "api", "detected_level": "error",
          "service_name": "api"}, "b one error")]


def test_duplicated_and_unsorted_ids_read_the_same(two):
    assert log_lines(two, '{app="api"}', "b|a|b") == log_lines(two, '{app="api"}', "a|b")


def test_a_single_tenant_reads_as_before(two):
    assert log_lines(two, '{app="api"}', "a") == [
        ({"app": "api", "detected_level": "error", "service_name": "api"}, "a two error"),
        ({"app": "api", "detected_level": "unknown", "service_name": "api"}, "a one")]
    assert log_lines(two, '{app="api"}', "a|a") == log_lines(two, '{app="api"}', "a")


def test_tenant_matchers_choose_tenants(two):
    assert [line for _, line in log_lines(two, '{app="api", __tenant_id__="b"}')] == \
        ["b one error"]
    assert [line for _, line in log_lines(two, '{app=~".+", __tenant_id__!="b"}')] == \
        ["a two error", "a one"]
    assert [line for _, line in log_lines(two, '{__tenant_id__=~"a|b", app="web"}')] == \
        ["b web"]


def test_a_data_label_named_tenant_id_is_renamed(two):
    assert log_lines(two, '{app="web"}') == [
        ({"__tenant_id__": "b", "app": "web", "detected_level": "unknown",
          "original___tenant_id__": "own", "service_name": "web"}, "b web")]
    assert [line for _, line in log_lines(two, '{original___tenant_id__="own"}')] == ["b web"]
    assert log_lines(two, '{original___tenant_id__="other"}') == []


def test_pipeline_label_filter_on_tenant(two):
    assert [line for _, line in log_lines(two, '{app="api"} | __tenant_id__="a"')] == \
        ["a two error", "a one"]


def metric(client, query: str, tenants: str = "a|b", path: str = "query_range") -> list:
    params = {"query": query, "step": "60", **RANGE} if path == "query_range" else \
        {"query": query, "time": str(T0 + 60 * NS)}
    r = client.get("/logstore/api/v1/" + path, headers=org(tenants), params=params)
    assert r.status_code == 200, r.text
    return r.json()["data"]["result"]


def test_metric_queries_from_rollups_and_from_the_scan(two):
    # rollups: a bare selector
    assert metric(two, 'sum by (__tenant_id__) (count_over_time({app="api"}[1m]))') == [
        {"metric": {"__tenant_id__": "a"}, "values": [[(T0 + 60 * NS) // NS, "2"]]},
        {"metric": {"__tenant_id__": "b"}, "values": [[(T0 + 60 * NS) // NS, "1"]]}]
    assert metric(two, 'sum(count_over_time({app="api"}[1m]))') == [
        {"metric": {}, "values": [[(T0 + 60 * NS) // NS, "3"]]}]
    # the scan path: a line filter
    assert metric(two, 'sum by (__tenant_id__) (count_over_time({app="api"} |= "error"'
                       ' [1m]))') == [
        {"metric": {"__tenant_id__": "a"}, "values": [[(T0 + 60 * NS) // NS, "1"]]},
        {"metric": {"__tenant_id__": "b"}, "values": [[(T0 + 60 * NS) // NS, "1"]]}]


def test_instant_metric_query(two):
    assert metric(two, 'sum by (__tenant_id__, app) (count_over_time({app=~".+"}[1m]))',
                  path="query") == [
        {"metric": {"__tenant_id__": "a", "app": "api"}, "value": [(T0 + 60 * NS) // NS, "2"]},
        {"metric": {"__tenant_id__": "b", "app": "api"}, "value": [(T0 + 60 * NS) // NS, "1"]},
        {"metric": {"__tenant_id__": "b", "app": "web"}, "value": [(T0 + 60 * NS) // NS, "1"]}]


def test_labels_values_and_series(two):
    h = org("a|b")
    r = two.get("/logstore/api/v1/labels", headers=h, params=RANGE)
    assert r.json() == {"status": "success", "data": [
        "__tenant_id__", "app", "original___tenant_id__", "service_name"]}
    r = two.get("/logstore/api/v1/label/__tenant_id__/values", headers=h, params=RANGE)
    assert r.json() == {"status": "success", "data": ["a", "b"]}
    r = two.get("/logstore/api/v1/label/__tenant_id__/values", headers=h,
                params={"query": '{app="web"}', **RANGE})
    assert r.json() == {"status": "success", "data": ["b"]}
    r = two.get("/logstore/api/v1/label/app/values", headers=h, params=RANGE)
    assert r.json() == {"status": "success", "data": ["api", "web"]}
    r = two.get("/logstore/api/v1/series", headers=h, params={"match[]": '{app="api"}', **RANGE})
    assert r.json() == {"status": "success", "data": [
        {"__tenant_id__": "a", "app": "api", "service_name": "api"},
        {"__tenant_id__": "b", "app": "api", "service_name": "api"}]}
    # a single tenant: no __tenant_id__, the data's own label as it is
    r = two.get("/logstore/api/v1/series", headers=org("b"),
                params={"match[]": '{app="web"}', **RANGE})
    assert r.json()["data"] == [{"__tenant_id__": "own", "app": "web", "service_name": "web"}]


def test_series_over_two_tenants_byte_for_byte(two):
    # names that sort before __tenant_id__ (upper case, `_`-led), the data's own
    # __tenant_id__, odd values: `__tenant_id__` last in each object, sets sorted by their
    # text with it, as with one tenant
    push(two, "a", {"Zone": "eu", "app": "x"}, [(T0 + NS, "z")])
    push(two, "b", {"_hidden": "1", "app": "x"}, [(T0 + NS, "h")])
    push(two, "b", {"app": "x", "v": 'say "hi"\n'}, [(T0 + NS, "q")])
    r = two.get("/logstore/api/v1/series", headers=org("a|b"),
                params={"match[]": ['{app="x"}', '{app="web"}'], **RANGE})
    assert r.status_code == 200
    assert r.content == (
        b'{"status":"success","data":['
        b'{"Zone":"eu","app":"x","service_name":"x","__tenant_id__":"a"},'
        b'{"_hidden":"1","app":"x","service_name":"x","__tenant_id__":"b"},'
        b'{"app":"web","service_name":"web","original___tenant_id__":"own","__tenant_id__":"b"},'
        b'{"app":"x","service_name":"x","v":"say \\"hi\\"\\n","__tenant_id__":"b"}]}')


def test_disabled_refuses_several_tenants(make_client):
    client = make_client({"auth_enabled": True})
    for path in ("/logstore/api/v1/query_range", "/logstore/api/v1/labels",
                 "/logstore/api/v1/series", "/loki/api/v1/query"):
        r = client.get(path, headers=org("a|b"), params={"query": '{app="api"}',
                                                         "match[]": '{app="api"}'})
        assert (r.status_code, r.text) == (400, "multiple org IDs present")


@pytest.mark.parametrize("header, status, text", [
    ("a|", 401, "no org id"),
    ("a|..", 400, "tenant ID is '.' or '..'"),
    ("a|b/c", 400, "tenant ID 'b/c' contains unsupported character '/'"),
    ("a|" + "x" * 151, 400, "tenant ID is too long: max 150 characters"),
])
def test_every_id_is_validated(make_client, header, status, text):
    client = make_client(MULTI)
    r = client.get("/logstore/api/v1/labels", headers=org(header))
    assert (r.status_code, r.text) == (status, text)


def test_push_stays_single_tenant(make_client):
    client = make_client(MULTI)
    r = client.post("/logstore/api/v1/push", headers={**JSON_HEADERS, **org("a|b")},
                    content=push_body({"app": "x"}, [[str(time.time_ns()), "x"]]))
    assert (r.status_code, r.text) == (400, "multiple org IDs present\n")


def test_tail_stays_single_tenant(make_server):
    server = make_server(MULTI)
    url = (server.url.replace("http://", "ws://") + "/loki/api/v1/tail?"
           + urlencode({"query": '{app="x"}'}))

    async def main() -> tuple[int, bytes]:
        with pytest.raises(websockets.InvalidStatus) as info:
            async with websockets.connect(url, additional_headers=org("a|b")):
                pass
        return info.value.response.status_code, bytes(info.value.response.body)

    assert asyncio.run(main()) == (400, b"multiple org IDs present")
