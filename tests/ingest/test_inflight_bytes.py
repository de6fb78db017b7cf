"""`distributor.max_inflight_bytes` (Loki's distributor limit): the push bodies held at once,
read and inflated, are bounded across all clients. Past the limit a push is answered 503
with Loki's text (clients retry it), nothing of it is stored, and the bytes are given back
as soon as a push is answered."""

from __future__ import annotations

import gzip
import json
import re
import socket

import httpx
import pytest

from tests.helpers import JSON_HEADERS, PUSH

BUSY = "The server cannot accept more requests at this time.\n"
LIMIT = 1 << 20


def body(n_lines: int, width: int = 100, app: str = "x") -> bytes:
    values = [[str(1_700_000_000_000_000_000 + i), f"{i:08d} " + "y" * width]
              for i in range(n_lines)]
    return json.dumps({"streams": [{"stream": {"app": app}, "values": values}]}).encode()


def metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics").text
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m, name
    return float(m.group(1))


def stored(url: str, app: str) -> int:
    r = httpx.get(url + "/logstore/api/v1/query", params={
        "query": f'sum(count_over_time({{app="{app}"}}[1h]))', "time": "1700000001000000000"})
    result = r.json()["data"]["result"]
    return int(result[0]["value"][1]) if result else 0


CONFIG = {"distributor": {"max_inflight_bytes": "1MB"},
          "limits_config": {"reject_old_samples": False}}


def test_a_body_inflating_past_the_limit_is_503_and_the_bytes_come_back(make_server):
    srv = make_server(CONFIG)
    big = gzip.compress(body(12_000, app="big"))  # ~1.3 MB inflated, ~30 KB sent
    r = httpx.post(srv.url + PUSH, content=big,
                   headers={**JSON_HEADERS, "Content-Encoding": "gzip"})
    assert (r.status_code, r.text) == (503, BUSY)
    assert stored(srv.url, "big") == 0
    assert metric(srv.url, "logstore_distributor_inflight_refused_total") == 1
    assert metric(srv.url, "logstore_distributor_inflight_bytes") == 0
    small = gzip.compress(body(5_000, app="small"))  # ~0.6 MB: fits once the other is gone
    r = httpx.post(srv.url + PUSH, content=small,
                   headers={**JSON_HEADERS, "Content-Encoding": "gzip"})
    assert r.status_code == 204, r.text
    assert stored(srv.url, "small") == 5_000


def test_bodies_in_flight_together_share_the_limit(make_server):
    srv = make_server(CONFIG)
    first = body(5_000, app="first")   # ~0.6 MB each: one fits, two do not
    second = body(5_000, app="second")
    host, port = srv.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as slow:
        slow.sendall((f"POST {PUSH} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(first)}\r\n\r\n").encode() + first[:-10])
        # the server holds what it has read of the first body until the rest comes
        deadline_polls = 0
        while metric(srv.url, "logstore_distributor_inflight_bytes") < len(first) - 10:
            deadline_polls += 1
            assert deadline_polls < 2000, "the server never read the first body"
        r = httpx.post(srv.url + PUSH, content=second, headers=JSON_HEADERS)
        assert (r.status_code, r.text) == (503, BUSY)
        slow.sendall(first[-10:])
        reply = slow.recv(4096).decode()
        assert reply.startswith("HTTP/1.1 204"), reply
    r = httpx.post(srv.url + PUSH, content=second, headers=JSON_HEADERS)
    assert r.status_code == 204, r.text
    assert (stored(srv.url, "first"), stored(srv.url, "second")) == (5_000, 5_000)


def test_no_limit_and_a_negative_limit(make_server):
    from config import ConfigError, config_from_dict

    srv = make_server({"distributor": {"max_inflight_bytes": 0},
                       "limits_config": {"reject_old_samples": False}})
    big = gzip.compress(body(12_000, app="big"))
    r = httpx.post(srv.url + PUSH, content=big,
                   headers={**JSON_HEADERS, "Content-Encoding": "gzip"})
    assert r.status_code == 204, r.text
    with pytest.raises(ConfigError) as info:
        config_from_dict({"distributor": {"max_inflight_bytes": -1}})
    assert str(info.value) == "max inflight bytes cannot be less than zero"
