"""Recording rules remote-written: the series in a real Prometheus with the right labels and
values, samples buffered in SQLite while it is down (and across a logstore restart) and sent
when it returns; an in-process receiver for refusals, retries and the buffer bound."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.helpers import JSON_HEADERS, PUSH, push_body

RULES = "/logstore/api/v1/rules"
S = 10**9
RECORD = """\
name: errors
rules:
  - record: job:error_lines:count1m
    expr: sum by (job) (count_over_time({job=~"checkout|cart"} |= "error" [1m]))
    labels:
      team: shop
"""


def _config(clients: dict, **remote_write) -> dict:
    return {"limits_config": {"reject_old_samples": False},
            "ruler": {"remote_write": {"enabled": True, "clients": clients, **remote_write}}}


def _setup(client, body: str = RECORD):
    ruler = client.app.state.services.ruler
    client.blocking_portal.call(ruler.pause)
    assert client.post(f"{RULES}/shop", content=body).status_code == 202
    return ruler, ruler.runs[("fake", "shop", "errors")]


def _push(client, at: int, job: str, n: int) -> None:
    values = [[str(at + i * 10**6), f"error {i}"] for i in range(n)]
    r = client.post(PUSH, content=push_body({"job": job}, values), headers=JSON_HEADERS)
    assert r.status_code == 204


def _evaluate(client, ruler, run, ts: int) -> None:
    client.blocking_portal.call(ruler.evaluate, run, ts)


def _wait_sent(client, ruler, total: int, timeout: float = 20) -> None:
    """Until the remote writer reports `total` samples sent, over all its clients."""
    deadline = time.monotonic() + timeout
    while sum(ruler.remote.sent.values()) < total:
        assert time.monotonic() < deadline, ruler.remote.sent
        client.blocking_portal.call(_tick)


async def _tick() -> None:
    import asyncio
    await asyncio.sleep(0.02)  # lets the sender task run; the loop checks the condition


def _prom_query(prom, query: str, at: float) -> list[dict]:
    r = httpx.get(prom.url + "/api/v1/query", params={"query": query, "time": str(at)},
                  timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["data"]["result"]


def test_recorded_series_arrive_in_prometheus(make_client, prometheus):
    c = make_client(_config({"prom": {"url": prometheus.url + "/api/v1/write"}}))
    ruler, run = _setup(c)
    now = (time.time_ns() // S) * S
    t1, t2 = now - 120 * S, now - 60 * S
    _push(c, t1 - 30 * S, "checkout", 4)
    _push(c, t1 - 30 * S, "cart", 2)
    _evaluate(c, ruler, run, t1)
    _push(c, t2 - 10 * S, "checkout", 9)
    _evaluate(c, ruler, run, t2)
    _wait_sent(c, ruler, 3)
    got = _prom_query(prometheus, "job:error_lines:count1m", t1 / S)
    assert sorted(((r["metric"], r["value"][1]) for r in got), key=lambda x: x[0]["job"]) == [
        ({"__name__": "job:error_lines:count1m", "job": "cart", "team": "shop"}, "2"),
        ({"__name__": "job:error_lines:count1m", "job": "checkout", "team": "shop"}, "4")]
    r = httpx.get(prometheus.url + "/api/v1/query_range", params={
        "query": 'job:error_lines:count1m{job="checkout"}', "start": str(t1 / S),
        "end": str(t2 / S), "step": "60"}, timeout=10).json()
    assert r["data"]["result"][0]["values"] == [[t1 / S, "4"], [t2 / S, "9"]]


def test_samples_wait_for_prometheus_across_a_restart(make_client, prometheus, tmp_path):
    config = _config({"prom": {"url": prometheus.url + "/api/v1/write"}})
    data = tmp_path / "data"
    prometheus.stop()
    c = make_client(config, data_dir=data)
    ruler, run = _setup(c)
    now = (time.time_ns() // S) * S
    stamps = [now - k * 60 * S for k in (3, 2, 1)]
    for ts in stamps:
        _push(c, ts - 20 * S, "checkout", 5)
        _evaluate(c, ruler, run, ts)
    assert c.blocking_portal.call(ruler.remote.buffered) == {"prom": 3}
    metrics = c.get("/metrics").text
    assert 'logstore_ruler_remote_write_buffered_samples{client="prom"} 3.0' in metrics
    c.__exit__(None, None, None)  # logstore stops with the samples still buffered

    prometheus.start()
    c = make_client(config, data_dir=data)
    ruler = c.app.state.services.ruler
    _wait_sent(c, ruler, 3)
    assert c.blocking_portal.call(ruler.remote.buffered) == {}
    r = httpx.get(prometheus.url + "/api/v1/query_range", params={
        "query": "job:error_lines:count1m", "start": str(stamps[0] / S),
        "end": str(stamps[-1] / S), "step": "60"}, timeout=10).json()
    (series,) = r["data"]["result"]
    assert series["values"] == [[ts / S, "5"] for ts in stamps]


def test_a_refusing_receiver_drops_and_a_failing_one_is_retried(make_client, receiver):
    receiver.status = 400
    c = make_client(_config({"r": {"url": receiver.url + "/push",
                                   "headers": {"X-Extra": "1"}}}))
    ruler, run = _setup(c)
    now = (time.time_ns() // S) * S
    _push(c, now - 10 * S, "checkout", 3)
    _evaluate(c, ruler, run, now)
    receiver.wait_for(1)
    deadline = time.monotonic() + 10
    while ruler.remote.failed["r"] < 1:
        assert time.monotonic() < deadline
        c.blocking_portal.call(_tick)
    path, headers, _ = receiver.requests[0]
    assert path == "/push"
    assert headers["Content-Encoding"] == "snappy"
    assert headers["Content-Type"] == "application/x-protobuf"
    assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
    assert headers["X-Scope-OrgID"] == "fake"
    assert headers["X-Extra"] == "1"
    assert receiver.samples() == [({"__name__": "job:error_lines:count1m", "job": "checkout",
                                    "team": "shop"}, now // 10**6, 3.0)]

    receiver.status = 503  # retried until it takes them
    _push(c, now + 50 * S, "checkout", 3)
    _evaluate(c, ruler, run, now + 60 * S)
    receiver.wait_for(3)
    receiver.status = 204
    _wait_sent(c, ruler, 1)
    assert ruler.remote.retries["r"] >= 2
    assert receiver.samples()[-1][1:] == ((now + 60 * S) // 10**6, 3.0)


def test_the_buffer_keeps_the_newest(make_client):
    c = make_client(_config({"gone": {"url": "http://127.0.0.1:9/write"}},
                            max_buffered_samples=2))
    ruler, run = _setup(c)
    now = (time.time_ns() // S) * S
    for k in range(4):
        _push(c, now + k * 60 * S - 10 * S, "checkout", k + 1)
        _evaluate(c, ruler, run, now + k * 60 * S)
    import sqlite3
    conn = sqlite3.connect(c.app.state.services.db.path)
    kept = [r[0] for r in conn.execute("SELECT value FROM remote_write_buffer ORDER BY id")]
    conn.close()
    assert kept == [3.0, 4.0]
    assert ruler.remote.dropped["gone"] == 2


@pytest.mark.parametrize("remote_write, message", [
    ({"enabled": True, "clients": {"p": {"url": "http://x", "nope": 1}}},
     "unknown configuration key 'ruler.remote_write.clients.p.nope'"),
    ({"enabled": True, "clients": {"p": {"name": "x"}}},
     "ruler.remote_write.clients.p.url must be set"),
    ({"bogus": True}, "unknown configuration key 'ruler.remote_write.bogus'"),
])
def test_config_errors(tmp_path, remote_write, message):
    from config import ConfigError
    from tests.conftest import make_config
    with pytest.raises(ConfigError) as exc:
        make_config(tmp_path, {"ruler": {"remote_write": remote_write}})
    assert message in str(exc.value)
