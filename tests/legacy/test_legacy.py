"""The deprecated /api/compat (Loki: /api/prom) endpoints and their old response shapes
(http-api.md §15), and the tail paths asked without a WebSocket upgrade."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from urllib.parse import urlencode

import httpx
import logging_loki
import pytest
import websockets

from tests.conftest import module_client
from tests.query.conftest import OLD_DATA
from tests.helpers import JSON_HEADERS, push_body

T0 = 1_700_000_000 * 10**9  # 2023-11-14T22:13:20Z


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, storage_state):
    with module_client(tmp_path_factory, storage_state, OLD_DATA) as client:
        yield _push_requests(client)


def _push_requests(client):
    r = client.post("/logstore/api/v1/push", headers=JSON_HEADERS, content=push_body(
        {"app": "api", "env": "prod"},
        [[str(T0), "GET /health 200"], [str(T0 + 123_456_789), "GET /orders 500"],
         [str(T0 + 2 * 10**9 + 500_000_000), "POST /orders 201"]]))
    assert r.status_code == 204
    return client


RANGE = {"start": str(T0 - 10**9), "end": str(T0 + 10 * 10**9)}
STREAM = '{app="api", detected_level="unknown", env="prod", service_name="api"}'


def _without_stats(body: dict) -> dict:
    assert set(body["stats"]) >= {"summary", "querier", "ingester"}
    return {k: v for k, v in body.items() if k != "stats"}


@pytest.mark.parametrize("prefix", ["/api/compat", "/api/prom"])
def test_query_old_shape(loaded, prefix):
    r = loaded.get(prefix + "/query", params={"query": '{app="api"}', **RANGE})
    assert r.status_code == 200
    assert _without_stats(r.json()) == {"streams": [{"labels": STREAM, "entries": [
        {"ts": "2023-11-14T22:13:22.5Z", "line": "POST /orders 201"},
        {"ts": "2023-11-14T22:13:20.123456789Z", "line": "GET /orders 500"},
        {"ts": "2023-11-14T22:13:20Z", "line": "GET /health 200"}]}]}


def test_query_regexp_limit_and_direction(loaded):
    r = loaded.post("/api/compat/query", data={
        "query": '{app="api"}', "regexp": "orders [0-9]+", "limit": "1",
        "direction": "forward", **RANGE})
    assert r.status_code == 200
    assert _without_stats(r.json()) == {"streams": [{"labels": STREAM, "entries": [
        {"ts": "2023-11-14T22:13:20.123456789Z", "line": "GET /orders 500"}]}]}


def test_query_regexp_with_a_quote_is_quoted(loaded):
    r = loaded.get("/api/compat/query", params={"query": '{app="api"}', "regexp": '"', **RANGE})
    assert r.status_code == 200
    assert r.json()["streams"] == []


@pytest.mark.parametrize("query, status, text", [
    ('rate({app="api"}[1m])', 400, "legacy endpoints only support streams result type"),
    ('{app="api"', 400, "parse error at line 1, col 11: syntax error: unexpected $end, "
                        "expecting } or ,"),
    ("", 400, "parse error : syntax error: unexpected $end"),
])
def test_query_errors(loaded, query, status, text):
    r = loaded.get("/api/compat/query", params={"query": query, **RANGE})
    assert (r.status_code, r.text) == (status, text)


def test_query_limit_error(loaded):
    r = loaded.get("/api/compat/query", params={"query": '{app="api"}', "limit": "0"})
    assert (r.status_code, r.text) == (400, "limit must be a positive value")


@pytest.mark.parametrize("prefix", ["/api/compat", "/api/prom"])
def test_labels_and_values(loaded, prefix):
    assert loaded.get(prefix + "/label", params=RANGE).json() == \
        {"values": ["app", "env", "service_name"]}
    # logstore answers the values of <name> (Loki's routing bug answers names here)
    assert loaded.get(prefix + "/label/env/values", params=RANGE).json() == {"values": ["prod"]}
    r = loaded.get(prefix + "/label/unknown/values", params=RANGE)
    assert (r.status_code, r.text) == (200, "{}")


def test_labels_empty_range_omits_the_key(loaded):
    r = loaded.get("/api/compat/label", params={"start": "1", "end": "2"})
    assert (r.status_code, r.text) == (200, "{}")


def test_series_same_as_v1(loaded):
    params = {"match[]": '{env="prod"}', **RANGE}
    legacy = loaded.get("/api/prom/series", params=params)
    v1 = loaded.get("/logstore/api/v1/series", params=params)
    assert legacy.status_code == v1.status_code == 200
    assert legacy.json() == v1.json() == {"status": "success", "data": [
        {"app": "api", "env": "prod", "service_name": "api"}]}


@pytest.mark.parametrize("path", ["/logstore/api/v1/tail", "/loki/api/v1/tail",
                                  "/api/compat/tail", "/api/prom/tail"])
def test_tail_without_upgrade(client, path):
    r = client.get(path, params={"query": "{"})
    assert (r.status_code, r.text) == (
        400, "parse error at line 1, col 2: syntax error: unexpected $end, "
             "expecting IDENTIFIER or }")
    r = client.get(path, params={"query": '{app="api"}', "delay_for": "6"})
    assert (r.status_code, r.text) == (400, "delay_for can't be greater than 5")
    r = client.get(path, params={"query": '{app="api"}'})
    assert (r.status_code, r.text) == (400, "Bad Request\n")
    assert r.headers["sec-websocket-version"] == "13"


def test_legacy_tail_frames_with_a_real_client(server):
    url = (server.url.replace("http://", "ws://") + "/api/prom/tail?"
           + urlencode({"query": '{app="old"}', "start": str(time.time_ns() - 10**9)}))
    ts = (time.time_ns() // 10**9) * 10**9

    async def main() -> dict:
        async with websockets.connect(url) as ws:
            async with httpx.AsyncClient() as http:
                r = await http.post(server.url + "/api/prom/push", headers=JSON_HEADERS,
                                    content=json.dumps({"streams": [{
                                        "labels": '{app="old"}',
                                        "entries": [{"ts": f"{ts // 10**9}", "line": "x"}]}]}))
                assert r.status_code == 204, r.text
            return json.loads(await asyncio.wait_for(ws.recv(), 10))

    frame = asyncio.run(main())
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts // 10**9))
    assert frame == {"streams": [{
        "labels": '{app="old", detected_level="unknown", service_name="old"}',
        "entries": [{"ts": stamp, "line": "x"}]}], "dropped_entries": None}


def test_python_logging_loki_v0_reads_back_from_the_legacy_query(server):
    logger = logging.getLogger("test-legacy-v0")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = logging_loki.LokiHandler(url=server.url + "/api/prom/push",
                                       tags={"app": "v0-app"}, version="0")
    errors: list[BaseException] = []
    handler.handleError = lambda record: errors.append(sys.exc_info()[1])
    logger.addHandler(handler)
    try:
        logger.warning("cache %s evicted", "users")
    finally:
        logger.removeHandler(handler)
    assert errors == []
    r = httpx.get(server.url + "/api/compat/query", params={"query": '{app="v0-app"}'})
    assert r.status_code == 200
    streams = r.json()["streams"]
    assert [e["line"] for s in streams for e in s["entries"]] == ["cache users evicted"]
    assert streams[0]["labels"] == ('{app="v0-app", detected_level="warn", '
                                    'logger="test-legacy-v0", service_name="v0-app", '
                                    'severity="warning"}')
