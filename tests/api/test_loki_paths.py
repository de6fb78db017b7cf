"""Loki's own paths (`/loki`, `/prometheus`, `/api/prom`) answer as logstore's do, from one
routing table; real clients pointed at them unchanged."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from urllib.parse import urlencode

import httpx
import logging_loki
import pytest
import websockets
from litestar.routes import HTTPRoute, WebSocketRoute

from routes.paths import LOKI_PREFIXES, is_loki_alias, loki_alias
from tests.helpers import JSON_HEADERS, push_body

OURS = tuple(ours for ours, _ in LOKI_PREFIXES)
PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


def _route_table(app) -> dict[str, object]:
    """path -> the handler function(s) behind it, for every route of the app (Litestar
    registers a copy of a handler object per path, so the function is what is shared)."""
    table: dict[str, object] = {}
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            table[route.path] = frozenset(h.fn for h in route.route_handlers
                                          if h.http_methods != {"OPTIONS"})
        elif isinstance(route, WebSocketRoute):
            table[route.path] = frozenset({route.route_handler.fn})
    return table


def test_every_route_has_its_loki_alias_with_the_same_handler(client):
    table = _route_table(client.app)
    ours = [p for p in table if p.startswith(OURS)]
    assert "/logstore/api/v1/push" in ours and "/logstore/api/v1/tail" in ours
    for path in ours:
        alias = loki_alias(path)
        assert alias in table, f"{path} has no Loki alias"
        assert table[alias] == table[path], f"{alias} is served by another handler"
    for path in table:
        if is_loki_alias(path):
            ours_path = next(o + path[len(t):] for o, t in LOKI_PREFIXES if path.startswith(t))
            assert ours_path in table, f"{path} exists under Loki's name only"


def test_loki_paths_false_turns_the_aliases_off(make_client):
    client = make_client({"server": {"loki_paths": False}})
    assert not [p for p in _route_table(client.app) if is_loki_alias(p)]
    r = client.get("/loki/api/v1/labels")
    assert (r.status_code, r.text) == (404, "404 page not found\n")
    assert client.get("/logstore/api/v1/labels").status_code == 200


def _without_timings(text: str) -> object:
    try:
        body = json.loads(text)
    except ValueError:
        return text
    if isinstance(body, dict):  # execution times differ from call to call
        body.pop("stats", None)  # the legacy query shape
        if isinstance(body.get("data"), dict):
            body["data"].pop("stats", None)
    return body


def test_every_http_route_answers_the_same_under_both_names(client):
    now = time.time_ns()
    r = client.post("/loki/api/v1/push", headers=JSON_HEADERS,
                    content=push_body({"app": "api"}, [[str(now - 10**9), "level=info hello"]]))
    assert r.status_code == 204
    params = {"query": '{app="api"}', "match[]": '{app="api"}', "start": str(now - 60 * 10**9),
              "end": str(now), "time": str(now), "step": "10s"}
    compared = 0
    for route in client.app.routes:
        if not isinstance(route, HTTPRoute) or not route.path.startswith(OURS):
            continue
        path = PARAM.sub("app", route.path)
        for method in sorted(route.methods - {"HEAD", "OPTIONS"}):
            if method == "POST" and path.endswith("/push"):
                continue  # compared above by pushing through the alias
            ours = client.request(method, path, params=params)
            theirs = client.request(method, loki_alias(path), params=params)
            assert theirs.status_code == ours.status_code, (method, path)
            assert theirs.headers.get("content-type") == ours.headers.get("content-type")
            assert _without_timings(theirs.text) == _without_timings(ours.text), (method, path)
            compared += 1
    assert compared >= 10
    r = client.get("/loki/api/v1/query_range", params={"query": '{app="api"}'})
    assert [v[1] for s in r.json()["data"]["result"] for v in s["values"]] == ["level=info hello"]


def test_grafana_loki_data_source_requests(client):
    """Requests shaped as Grafana's Loki data source sends them (pkg/tsdb/loki): GET with
    nanosecond start/end, step in ms, its headers, through the /loki paths."""
    now = time.time_ns()
    values = [[str(now - i * 10**9), f"level=error msg=\"boom {i}\""] for i in range(3)]
    r = client.post("/loki/api/v1/push", headers=JSON_HEADERS,
                    content=push_body({"job": "checkout"}, values))
    assert r.status_code == 204
    grafana = {"X-Query-Tags": "Source=logsample", "X-Grafana-Org-Id": "1",
               "X-Grafana-User": "admin", "X-Dashboard-Uid": "abc", "X-Panel-Id": "2",
               "X-Loki-Response-Encoding-Flags": "categorize-labels",
               "User-Agent": "Grafana/12.1.0"}
    # the data source's health check: an instant `vector(1)+vector(1)` at t=4s
    r = client.get("/loki/api/v1/query", headers=grafana,
                   params={"query": "vector(1)+vector(1)", "direction": "backward",
                           "time": "4000000000"})
    assert r.status_code == 200
    # "4000000000" has 10 digits, so Loki (and logstore) read it as seconds: Grafana only
    # checks the value
    assert r.json()["data"]["result"] == [{"metric": {}, "value": [4000000000, "2"]}]
    start, end = now - 3600 * 10**9, now + 10**9
    r = client.get("/loki/api/v1/query_range", headers=grafana, params={
        "query": '{job="checkout"} |= "boom"', "direction": "backward", "limit": "1000",
        "start": str(start), "end": str(end), "step": "2000ms"})
    assert r.status_code == 200
    data = r.json()["data"]
    assert data["encodingFlags"] == ["categorize-labels"]
    assert [v[1] for s in data["result"] for v in s["values"]] == [v[1] for v in values]
    r = client.get("/loki/api/v1/query_range", headers=grafana, params={
        "query": 'sum by (level) (count_over_time({job="checkout"} | logfmt [1m]))',
        "direction": "backward", "start": str(start), "end": str(end), "step": "60000ms"})
    assert r.status_code == 200
    series = r.json()["data"]["result"]
    assert [s["metric"] for s in series] == [{"level": "error"}]
    assert sum(float(v) for _, v in series[0]["values"]) >= 3
    r = client.get("/loki/api/v1/labels", headers=grafana,
                   params={"start": str(start), "end": str(end)})
    assert r.json() == {"status": "success", "data": ["job", "service_name"]}
    r = client.get("/loki/api/v1/label/job/values", headers=grafana,
                   params={"start": str(start), "end": str(end)})
    assert r.json() == {"status": "success", "data": ["checkout"]}
    r = client.get("/loki/api/v1/series", headers=grafana,
                   params={"match[]": '{job="checkout"}', "start": str(start), "end": str(end)})
    assert r.json() == {"status": "success",
                        "data": [{"job": "checkout", "service_name": "checkout"}]}


def test_build_info_gauge_on_metrics(client):
    """logstore_build_info names the same build as buildinfo, with logstore's own version
    (tests/runtime/test_loki_metrics.py checks the versions)."""
    text = client.get("/metrics").text
    line = next(x for x in text.splitlines() if x.startswith("logstore_build_info{"))
    assert line.endswith(" 1.0")
    labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
    info = client.get("/loki/api/v1/status/buildinfo").json()
    assert labels == {"version": labels["version"], "revision": info["revision"],
                      "branch": info["branch"],
                      "pythonversion": info["goVersion"].removeprefix("python")}


def test_python_logging_loki_and_tail_on_loki_paths(server):
    """A real server: python-logging-loki pointed at /loki/api/v1/push unchanged, and a
    WebSocket client tailing /loki/api/v1/tail sees the line."""
    logger = logging.getLogger("test-loki-paths")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = logging_loki.LokiHandler(url=server.url + "/loki/api/v1/push",
                                       tags={"app": "via-loki-path"}, version="1")
    errors: list[BaseException] = []
    handler.handleError = lambda record: errors.append(sys.exc_info()[1])
    tail_url = (server.url.replace("http://", "ws://") + "/loki/api/v1/tail?"
                + urlencode({"query": '{app="via-loki-path"}'}))

    async def main() -> list[str]:
        async with websockets.connect(tail_url) as ws:
            logger.addHandler(handler)
            try:
                await asyncio.to_thread(logger.warning, "queue %s is full", "orders")
            finally:
                logger.removeHandler(handler)
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
            return [v[1] for s in frame["streams"] for v in s["values"]]

    assert asyncio.run(main()) == ["queue orders is full"]
    assert errors == []
    r = httpx.get(server.url + "/loki/api/v1/query_range",
                  params={"query": '{app="via-loki-path"}'})
    assert [v[1] for s in r.json()["data"]["result"] for v in s["values"]] == \
        ["queue orders is full"]
    r = httpx.get(server.url + "/api/prom/tail", params={"query": '{app="x"}'})
    assert (r.status_code, r.text) == (400, "Bad Request\n")  # no upgrade asked for


@pytest.mark.parametrize("path", ["/loki", "/loki/", "/lokix/api/v1/labels"])
def test_only_whole_prefixes_are_aliased(client, path):
    assert client.get(path).status_code == 404
