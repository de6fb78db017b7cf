"""Query limits (issue 15): a read whose client went away stops on its thread; a tenant has a
bounded number of reads in flight (429 `too many outstanding requests` beyond), which does
not touch other tenants; `max_query_lookback`, `max_query_range` and
`max_concurrent_tail_requests` as Loki applies them, per tenant through the overrides."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from services.read.query_gate import QueryGate, TooManyOutstanding
from tests.helpers import JSON_HEADERS, PUSH

HOUR = 3600 * 10**9


def _push_slow_data(url: str, tenant: str, now: int, n: int = 20_000) -> None:
    """n logfmt lines over the last hour, each with its own value of `v`: grouping by `v`
    at a 1 s step makes n series of 3,600 windows, minutes of work for the engine."""
    start = now - HOUR
    values = [[str(start + i * (HOUR // n)), f"level=info v={i}"] for i in range(n)]
    r = httpx.post(url + PUSH, json={"streams": [{"stream": {"job": "x"}, "values": values}]},
                   headers={"X-Scope-OrgID": tenant}, timeout=60)
    assert r.status_code == 204, r.text


SLOW = 'sum by (v) (count_over_time({job="x"} | logfmt [10m]))'


def _slow_params(now: int) -> dict[str, str]:
    return {"query": SLOW, "start": str(now - HOUR), "end": str(now), "step": "1"}


def _slow_query(url: str, tenant: str, now: int, timeout: float) -> httpx.Response:
    return httpx.get(url + "/logstore/api/v1/query_range", params=_slow_params(now),
                     headers={"X-Scope-OrgID": tenant}, timeout=timeout)


def _metric(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def in_thread(fn) -> tuple[threading.Thread, list]:
    """fn() started on a thread; the list gets what it returned or raised, which the test's
    own thread then checks (an assertion inside a thread would be lost)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _open_slow_query(url: str, tenant: str, now: int) -> socket.socket:
    """The slow query sent on a socket the test closes when it is done with it: the server
    then sees its client gone and stops the read (the first test below), instead of computing on
    until a client timeout while the rest of the suite waits for the core."""
    parts = urlsplit(url)
    target = "/logstore/api/v1/query_range?" + urlencode(_slow_params(now))
    sock = socket.create_connection((parts.hostname, parts.port))
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                 f"X-Scope-OrgID: {tenant}\r\n\r\n".encode())
    return sock


def _answered(sock: socket.socket) -> bool:
    """Whether any byte of an answer has arrived (without waiting for one)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)


def _wait_for(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)  # polling an observable state, not timing the server
    raise AssertionError("condition not reached")


def test_a_read_stops_when_its_client_goes_away(make_server):
    srv = make_server({"auth_enabled": True, "limits_config": {"query_timeout": "10m"}})
    now = time.time_ns()
    _push_slow_data(srv.url, "a", now)
    with pytest.raises(httpx.ReadTimeout):
        _slow_query(srv.url, "a", now, timeout=1.5)   # the client gives up and disconnects
    # the read on the server's thread ends within moments, not after its 10 minutes
    _wait_for(lambda: _metric(srv.url, "logstore_query_reads_running") == 0, seconds=15)
    assert _metric(srv.url, "logstore_query_reads_cancelled_total") == 1
    r = httpx.get(srv.url + "/logstore/api/v1/labels", headers={"X-Scope-OrgID": "a"})
    assert r.json()["data"] == ["job", "service_name"]


def test_too_many_outstanding_reads_of_one_tenant_answer_429(make_server):
    srv = make_server({"auth_enabled": True,
                       "limits_config": {"query_timeout": "10m", "max_query_parallelism": 1},
                       "query_scheduler": {"max_outstanding_requests_per_tenant": 1}})
    now = time.time_ns()
    _push_slow_data(srv.url, "a", now)
    _push_slow_data(srv.url, "b", now, n=10)

    slow = _open_slow_query(srv.url, "a", now)
    try:
        _wait_for(lambda: _metric(srv.url, "logstore_query_reads_running") == 1)
        r = httpx.get(srv.url + "/logstore/api/v1/query", params={"query": 'count_over_time({job="x"}[1m])'},
                      headers={"X-Scope-OrgID": "a"})
        assert (r.status_code, r.text) == (429, "too many outstanding requests")
        assert _metric(srv.url, "logstore_query_scheduler_discarded_requests_total") == 1
        # another tenant is not held back by a's queue
        r = httpx.get(srv.url + "/logstore/api/v1/query_range", params={
            "query": 'sum(count_over_time({job="x"}[2h]))', "start": str(now - HOUR),
            "end": str(now), "step": "3600"}, headers={"X-Scope-OrgID": "b"}, timeout=30)
        assert r.status_code == 200
        assert r.json()["data"]["result"][0]["values"][-1][1] == "10"
        # all of that while a's slow read was still running, unanswered
        assert _metric(srv.url, "logstore_query_reads_running") == 1
        assert not _answered(slow)
    finally:
        slow.close()
    _wait_for(lambda: _metric(srv.url, "logstore_query_reads_running") == 0)


def test_the_gate_queues_a_tenant_beyond_its_parallelism_and_refuses_past_the_queue():
    async def scenario() -> list[str]:
        gate = QueryGate(max_concurrent=4, max_outstanding=2, parallelism_of=lambda t: 1)
        order: list[str] = []
        release = asyncio.Event()

        async def read(name: str) -> None:
            async with gate.slot("t"):
                order.append(f"{name} runs")
                await release.wait()

        first = asyncio.create_task(read("first"))
        await asyncio.sleep(0)
        second = asyncio.create_task(read("second"))
        await asyncio.sleep(0)
        assert order == ["first runs"] and gate.outstanding("t") == 2
        with pytest.raises(TooManyOutstanding):
            async with gate.slot("t"):
                pass
        async with gate.slot("other"):       # another tenant goes straight through
            order.append("other runs")
        release.set()
        await asyncio.gather(first, second)
        assert gate.outstanding("t") == 0
        return order

    assert asyncio.run(scenario()) == ["first runs", "other runs", "second runs"]


def test_a_cancelled_waiter_passes_its_turn_on():
    async def scenario() -> list[str]:
        gate = QueryGate(max_concurrent=0, max_outstanding=0, parallelism_of=lambda t: 1)
        order: list[str] = []
        release = asyncio.Event()

        async def read(name: str) -> None:
            async with gate.slot("t"):
                order.append(name)
                await release.wait()

        tasks = [asyncio.create_task(read(n)) for n in ("one", "two", "three")]
        await asyncio.sleep(0)
        tasks[1].cancel()                    # gone before its turn
        release.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        return order

    assert asyncio.run(scenario()) == ["one", "three"]


def _push(client, lines: list[tuple[int, str]], tenant: str = "fake") -> None:
    r = client.post(PUSH, content=json.dumps({"streams": [{"stream": {"job": "lb"}, "values": [
        [str(ts), line] for ts, line in lines]}]}), headers={**JSON_HEADERS,
                                                             "X-Scope-OrgID": tenant})
    assert r.status_code == 204, r.text


def test_max_query_lookback_reads_nothing_older(make_client):
    c = make_client({"limits_config": {"max_query_lookback": "1h",
                                       "reject_old_samples": False}})
    now = time.time_ns()
    _push(c, [(now - 3 * HOUR, "old"), (now - HOUR // 2, "recent")])
    r = c.get("/logstore/api/v1/query_range", params={
        "query": '{job="lb"}', "start": str(now - 4 * HOUR), "end": str(now)})
    assert [v[1] for s in r.json()["data"]["result"] for v in s["values"]] == ["recent"]
    r = c.get("/logstore/api/v1/query_range", params={
        "query": 'sum(count_over_time({job="lb"}[4h]))', "start": str(now - 4 * HOUR),
        "end": str(now), "step": "3600"})
    assert r.json()["data"]["result"][0]["values"][-1][1] == "1"
    # a range entirely before the lookback answers empty, with its result type
    for query, kind in (('{job="lb"}', "streams"),
                        ('count_over_time({job="lb"}[1h])', "matrix")):
        r = c.get("/logstore/api/v1/query_range", params={
            "query": query, "start": str(now - 4 * HOUR), "end": str(now - 2 * HOUR)})
        assert r.status_code == 200
        assert (r.json()["data"]["resultType"], r.json()["data"]["result"]) == (kind, [])
    r = c.get("/logstore/api/v1/query", params={
        "query": 'count_over_time({job="lb"}[1h])', "time": str(now - 2 * HOUR)})
    assert (r.json()["data"]["resultType"], r.json()["data"]["result"]) == ("vector", [])


def test_max_query_range_refuses_longer_ranges(make_client):
    c = make_client({"limits_config": {"max_query_range": "1h"}})
    now = time.time_ns()
    r = c.get("/logstore/api/v1/query", params={
        "query": 'sum(rate({job="lb"}[2h])) / sum(rate({job="lb"}[5m]))', "time": str(now)})
    assert (r.status_code, r.text) == (400, "[interval] value exceeds limit: [2h] > [1h]")
    r = c.get("/logstore/api/v1/query", params={
        "query": 'sum(rate({job="lb"}[1h]))', "time": str(now)})
    assert r.status_code == 200


def test_limits_follow_the_tenant_overrides(make_client, tmp_path):
    overrides = tmp_path / "overrides.yaml"
    overrides.write_text("overrides:\n  small:\n    max_query_range: 30m\n"
                         "    max_entries_limit_per_query: 2\n")
    c = make_client({"auth_enabled": True,
                     "runtime_config": {"file": str(overrides), "period": "1h"}})
    now = time.time_ns()
    q = {"query": 'rate({job="lb"}[1h])', "time": str(now)}
    assert c.get("/logstore/api/v1/query", params=q,
                 headers={"X-Scope-OrgID": "big"}).status_code == 200
    r = c.get("/logstore/api/v1/query", params=q, headers={"X-Scope-OrgID": "small"})
    assert (r.status_code, r.text) == (400, "[interval] value exceeds limit: [1h] > [30m]")
    r = c.get("/logstore/api/v1/query_range", params={
        "query": '{job="lb"}', "limit": "3", "start": str(now - HOUR), "end": str(now)},
        headers={"X-Scope-OrgID": "small"})
    assert (r.status_code, r.text) == (400, "max entries limit per query exceeded, limit > "
                                            "max_entries_limit_per_query (3 > 2)")
