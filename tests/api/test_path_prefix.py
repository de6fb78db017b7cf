"""server.http_path_prefix (README "Serving under a path prefix"): every route answers under
the prefix, Loki's paths and the Grafana API and the tail WebSocket included, and nothing
answers outside it; /metrics names routes as it does without a prefix."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets

import cli
import config as config_module
from tests.helpers import now_ns

PREFIX = "/logs"
NOT_FOUND = "404 page not found\n"


@pytest.fixture
def prefixed(make_client):
    return make_client({"server": {"http_path_prefix": PREFIX + "/"}})


def _push(client, path: str, line: str) -> int:
    body = {"streams": [{"stream": {"job": "prefixed"}, "values": [[str(now_ns()), line]]}]}
    return client.post(path, json=body).status_code


def test_every_route_answers_under_the_prefix(prefixed):
    assert _push(prefixed, PREFIX + "/loki/api/v1/push", "via loki") == 204
    assert _push(prefixed, PREFIX + "/logstore/api/v1/push", "via logstore") == 204
    r = prefixed.get(PREFIX + "/logstore/api/v1/query_range",
                     params={"query": '{job="prefixed"}', "limit": 10})
    assert r.status_code == 200, r.text
    lines = sorted(v[1] for s in r.json()["data"]["result"] for v in s["values"])
    assert lines == ["via logstore", "via loki"]
    assert prefixed.get(PREFIX + "/ready").text.strip() == "ready"
    # the Grafana API's own answer (signed in under a prefix: tests/grafana/test_session_login)
    r = prefixed.get(PREFIX + "/api/search")
    assert (r.status_code, r.json()) == (401, {"message": "Unauthorized"})
    r = prefixed.get(PREFIX + "/loki/api/v1/labels")
    assert r.status_code == 200 and "job" in r.json()["data"]
    # where clients find the prefix: Grafana's sub path, OpenAPI's server URL
    assert prefixed.get(PREFIX + "/api/frontend/settings").json()["appSubUrl"] == PREFIX
    assert prefixed.get(PREFIX + "/openapi.json").json()["servers"] == [{"url": PREFIX}]


def test_nothing_answers_outside_the_prefix(prefixed):
    for path in ("/ready", "/metrics", "/loki/api/v1/labels", "/logstore/api/v1/labels",
                 "/api/search", "/logsx/ready", "/", "/logstore/logs/ready"):
        r = prefixed.get(path)
        assert (r.status_code, r.text) == (404, NOT_FOUND), path
    assert _push(prefixed, "/loki/api/v1/push", "lost") == 404
    # the bare prefix is sent on to its directory, so relative URLs of the page resolve
    r = prefixed.get(PREFIX + "?a=1", follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (308, PREFIX + "/?a=1")


def test_metrics_name_routes_without_the_prefix(prefixed):
    assert prefixed.get(PREFIX + "/loki/api/v1/labels").status_code == 200
    assert prefixed.get("/loki/api/v1/labels").status_code == 404
    text = prefixed.get(PREFIX + "/metrics").text
    series = [line for line in text.splitlines()
              if line.startswith("loki_request_duration_seconds_count{")]
    assert any('route="loki_api_v1_labels"' in s and 'status_code="200"' in s for s in series)
    assert any('route="other"' in s and 'status_code="404"' in s for s in series)
    assert not any("logs_" in s for s in series)


@pytest.mark.parametrize("value", ["logs", "/a//b", "/a/../b", "/a b", "/ü"])
def test_a_bad_prefix_is_refused_at_start(value):
    with pytest.raises(config_module.ConfigError) as info:
        config_module.config_from_dict({"server": {"http_path_prefix": value}})
    assert str(info.value) == (
        "server.http_path_prefix must be a URL path such as /logs: a leading '/' and segments "
        "of letters, digits, '.', '_', '~' and '-' (no empty, '.' or '..' segment), got "
        f"{value!r}")


def test_lokis_flag_sets_it():
    cfg = cli.parse(["serve", "-server.path-prefix=/v1/"]).load()
    assert cfg.server.http_path_prefix == "/v1"


def test_tail_and_push_under_the_prefix_on_a_real_server(make_server):
    srv = make_server({"server": {"http_path_prefix": PREFIX}})
    ws = srv.url.replace("http://", "ws://")

    async def main():
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(ws + "/loki/api/v1/tail?query=%7Bjob%3D%22t%22%7D"):
                pass
        assert refused.value.response.status_code == 404
        url = ws + PREFIX + "/loki/api/v1/tail?query=%7Bjob%3D%22t%22%7D"
        async with websockets.connect(url) as sock:
            body = {"streams": [{"stream": {"job": "t"},
                                 "values": [[str(time.time_ns()), "live under prefix"]]}]}
            async with httpx.AsyncClient() as client:
                r = await client.post(srv.url + PREFIX + "/loki/api/v1/push", json=body)
                assert r.status_code == 204, r.text
                gone = await client.post(srv.url + "/loki/api/v1/push", json=body)
                assert gone.status_code == 404
            frame = json.loads(await asyncio.wait_for(sock.recv(), 10))
            assert [v[1] for s in frame["streams"] for v in s["values"]] == ["live under prefix"]
    asyncio.run(main())
