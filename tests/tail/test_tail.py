"""Live tail against a real `logstore serve`, with the `websockets` client."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from urllib.parse import urlencode

import httpx
import pytest
import websockets

from tests.conftest import LogstoreServer

TAIL = "/logstore/api/v1/tail"
LEGACY_TAIL = "/api/compat/tail"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LogstoreServer(tmp_path_factory.mktemp("tail") / "data").start()
    yield server
    server.stop()


def ws_url(server: LogstoreServer, path: str = TAIL, **params) -> str:
    return server.url.replace("http://", "ws://") + path + "?" + urlencode(params)


async def push(server: LogstoreServer, labels: dict, lines: list[str], ts: int | None = None,
               tenant: str | None = None) -> None:
    ts = ts or time.time_ns()
    body = {"streams": [{"stream": labels,
                         "values": [[str(ts + i), line] for i, line in enumerate(lines)]}]}
    headers = {"X-Scope-OrgID": tenant} if tenant else {}
    async with httpx.AsyncClient() as client:
        r = await client.post(server.url + "/logstore/api/v1/push", json=body, headers=headers)
    assert r.status_code == 204, r.text


async def entries_until(ws, count: int, timeout: float = 10) -> list[tuple[dict, list]]:
    """(stream labels, value) of received entries until `count` arrived."""
    got: list[tuple[dict, list]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        frame = json.loads(await asyncio.wait_for(ws.recv(), deadline - time.monotonic()))
        assert len([v for s in frame["streams"] for v in s["values"]]) <= 100
        for stream in frame["streams"]:
            got += [(stream["stream"], value) for value in stream["values"]]
    return got


def run(coro):
    return asyncio.run(coro)


def test_live_lines_arrive_and_the_filter_applies(srv):
    async def main():
        async with websockets.connect(ws_url(srv, query='{job="live"} |= "keep"')) as ws:
            await push(srv, {"job": "live"}, ["keep one", "drop two", "keep three"])
            await push(srv, {"job": "other"}, ["keep but other stream"])
            got = await entries_until(ws, 2)
            assert [v[1] for _, v in got] == ["keep one", "keep three"]
            labels = {"job": "live", "service_name": "live", "detected_level": "unknown"}
            assert all(stream == labels for stream, _ in got)
            # nothing else is on its way: a later push is the very next thing received
            await push(srv, {"job": "live"}, ["keep four"])
            assert [v[1] for _, v in await entries_until(ws, 1)] == ["keep four"]
    run(main())


def test_history_first_then_live(srv):
    async def main():
        base = time.time_ns() - 60 * 10**9
        await push(srv, {"job": "hist"}, [f"old {i}" for i in range(10)], ts=base)
        url = ws_url(srv, query='{job="hist"}', limit=3, start=str(base - 10**9))
        async with websockets.connect(url) as ws:
            history = await entries_until(ws, 3)
            assert [v[1] for _, v in history] == ["old 7", "old 8", "old 9"]
            assert [int(v[0]) for _, v in history] == [base + 7, base + 8, base + 9]
            await push(srv, {"job": "hist"}, ["new"])
            assert [v[1] for _, v in await entries_until(ws, 1)] == ["new"]
    run(main())


def test_many_live_lines_come_in_frames_of_at_most_100(srv):
    async def main():
        async with websockets.connect(ws_url(srv, query='{job="bulk"}')) as ws:
            await push(srv, {"job": "bulk"}, [f"line {i}" for i in range(250)])
            got = await entries_until(ws, 250)
            assert [v[1] for _, v in got] == [f"line {i}" for i in range(250)]
    run(main())


def test_delay_for_holds_live_entries_back(srv):
    async def main():
        async with websockets.connect(ws_url(srv, query='{job="late"}', delay_for="1")) as ws:
            pushed = time.monotonic()
            await push(srv, {"job": "late"}, ["b"], ts=time.time_ns())
            await push(srv, {"job": "late"}, ["a"], ts=time.time_ns() - 10**9)
            got = await entries_until(ws, 2)
            assert time.monotonic() - pushed >= 1.0
            # within the delay window entries are put in timestamp order
            assert [v[1] for _, v in got] == ["a", "b"]
    run(main())


@pytest.mark.parametrize("params,message", [
    ({"query": '{job="x"'}, "parse error at line 1, col 9: syntax error: unexpected $end, "
                            "expecting } or ,"),
    ({"query": '{job="x"}', "delay_for": "6"}, "delay_for can't be greater than 5"),
    ({"query": '{job="x"}', "delay_for": "soon"}, 'strconv.Atoi: parsing "soon": invalid syntax'),
    ({"query": '{job="x"}', "limit": "0"}, "limit must be a positive value"),
    ({"query": '{job="x"}', "limit": "5001"},
     "max entries limit per query exceeded, limit > max_entries_limit_per_query (5001 > 5000)"),
    ({"query": '{job="x"}', "start": "noon"},
     'could not parse \'start\' parameter: strconv.ParseInt: parsing "noon": invalid syntax'),
])
def test_bad_parameters_are_refused_before_the_upgrade(srv, params, message):
    async def main():
        with pytest.raises(websockets.InvalidStatus) as info:
            async with websockets.connect(ws_url(srv, **params)):
                pass
        response = info.value.response
        assert response.status_code == 400
        assert bytes(response.body).decode() == message
    run(main())


def test_metric_query_is_accepted_then_closed_1011(srv):
    async def main():
        async with websockets.connect(ws_url(srv, query='rate({job="x"}[1m])')) as ws:
            with pytest.raises(websockets.ConnectionClosedError) as info:
                await ws.recv()
        assert info.value.rcvd.code == 1011
        assert info.value.rcvd.reason == "only log selector is supported"
    run(main())


def test_categorize_labels_frames(srv):
    async def main():
        headers = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
        url = ws_url(srv, query='{job="cat"} | logfmt')
        async with websockets.connect(url, additional_headers=headers) as ws:
            await push(srv, {"job": "cat"}, ["level=warn msg=hi"])
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert frame == {
            "streams": [{"stream": {"job": "cat", "service_name": "cat"},
                         "values": [[frame["streams"][0]["values"][0][0], "level=warn msg=hi",
                                     {"structuredMetadata": {"detected_level": "warn"},
                                      "parsed": {"level": "warn", "msg": "hi"}}]]}],
            "encodingFlags": ["categorize-labels"]}
    run(main())


def test_legacy_tail_frame_shape(srv):
    async def main():
        async with websockets.connect(ws_url(srv, LEGACY_TAIL, query='{job="legacy"}')) as ws:
            await push(srv, {"job": "legacy"}, ["hello"], ts=1_700_000_000_123_456_789 +
                       (time.time_ns() // 10**9 - 1_700_000_000) * 10**9)
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        [stream] = frame["streams"]
        assert stream["labels"] == ('{detected_level="unknown", job="legacy", '
                                    'service_name="legacy"}')
        [entry] = stream["entries"]
        assert entry["line"] == "hello" and entry["ts"].endswith(".123456789Z")
        assert frame["dropped_entries"] is None
    run(main())


def test_concurrent_tail_limit_and_cleanup_after_close(srv):
    async def main():
        url = ws_url(srv, query='{job="many"}')
        sockets = [await websockets.connect(url) for _ in range(10)]
        try:
            async with websockets.connect(url) as extra:
                with pytest.raises(websockets.ConnectionClosedError) as info:
                    await extra.recv()
            assert info.value.rcvd.code == 1011
            assert info.value.rcvd.reason == ("max concurrent tail requests limit exceeded, "
                                              "count > limit (11 > 10)")
            await sockets.pop().close()
            # the closed session frees its place; the poll covers the server noticing
            deadline = time.monotonic() + 10
            while True:
                ws = await websockets.connect(url)
                await push(srv, {"job": "many"}, ["ping"])
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    assert frame["streams"][0]["values"][0][1] == "ping"
                    break
                except websockets.ConnectionClosedError:
                    assert time.monotonic() < deadline, "the closed tail was never released"
            for other in sockets:  # every open tail got the line too
                got = json.loads(await asyncio.wait_for(other.recv(), 5))
                assert got["streams"][0]["values"][0][1] == "ping"
            sockets.append(ws)
        finally:
            for ws in sockets:
                await ws.close()
    run(main())


def test_tenants_do_not_see_each_other(make_server):
    server = make_server({"auth_enabled": True})

    async def main():
        url = ws_url(server, query='{job="t"}')
        async with websockets.connect(url, additional_headers={"X-Scope-OrgID": "a"}) as ws:
            await push(server, {"job": "t"}, ["for b"], tenant="b")
            await push(server, {"job": "t"}, ["for a"], tenant="a")
            got = await entries_until(ws, 1)
            assert [v[1] for _, v in got] == ["for a"]
        # the legacy tail: history and live lines of its own tenant only
        legacy = ws_url(server, LEGACY_TAIL, query='{job="t"}',
                        start=str(time.time_ns() - 60 * 10**9))
        async with websockets.connect(legacy, additional_headers={"X-Scope-OrgID": "b"}) as ws:
            history = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert [e["line"] for s in history["streams"] for e in s["entries"]] == ["for b"]
            await push(server, {"job": "t"}, ["live for a"], tenant="a")
            await push(server, {"job": "t"}, ["live for b"], tenant="b")
            live = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert [e["line"] for s in live["streams"] for e in s["entries"]] == ["live for b"]
        with pytest.raises(websockets.InvalidStatus) as info:
            async with websockets.connect(url):
                pass
        assert info.value.response.status_code == 401
        assert bytes(info.value.response.body) == b"no org id"
    run(main())


def tenant_protocol(org: str) -> str:
    return "logstore.tenant." + base64.urlsafe_b64encode(org.encode()).decode().rstrip("=")


def test_a_browser_names_its_tenant_in_a_subprotocol(make_server):
    """A browser cannot set X-Scope-OrgID on a WebSocket: the tenant rides in the offered
    subprotocol, which the server echoes; the header, where sent, still decides."""
    server = make_server({"auth_enabled": True})

    async def main():
        url = ws_url(server, query='{job="sp"}')
        # an org id with characters a subprotocol token may not hold, hence base64
        org = "team(a)'s"
        async with websockets.connect(url, subprotocols=[tenant_protocol(org)]) as ws:
            assert ws.subprotocol == tenant_protocol(org)
            await push(server, {"job": "sp"}, ["for b"], tenant="b")
            await push(server, {"job": "sp"}, ["for a"], tenant=org)
            assert [v[1] for _, v in await entries_until(ws, 1)] == ["for a"]
        async with websockets.connect(url, subprotocols=[tenant_protocol(org)],
                                      additional_headers={"X-Scope-OrgID": "b"}) as ws:
            await push(server, {"job": "sp"}, ["b again"], tenant="b")
            assert [v[1] for _, v in await entries_until(ws, 2)] == ["for b", "b again"]
        for offer, status, message in [
                (tenant_protocol(".."), 400, b"tenant ID is '.' or '..'"),
                (tenant_protocol("a/b"), 400, b"tenant ID 'a/b' contains unsupported character '/'"),
                (tenant_protocol("a|b"), 400, b"multiple org IDs present"),
                (tenant_protocol(""), 401, b"no org id"),
                ("logstore.tenant.a+b", 400, b"subprotocol 'logstore.tenant.a+b' is not "
                                             b"logstore.tenant.<org id as unpadded base64url>")]:
            with pytest.raises(websockets.InvalidStatus) as info:
                async with websockets.connect(url, subprotocols=[offer]):
                    pass
            assert info.value.response.status_code == status, offer
            assert bytes(info.value.response.body) == message
    run(main())


def test_a_client_that_does_not_read_gets_dropped_entries(srv):
    """The client stops reading (its library buffers one frame, then TCP fills up): the
    server keeps a bounded backlog and reports what it had to drop."""
    async def main():
        url = ws_url(srv, query='{job="slow"}')
        async with websockets.connect(url, max_queue=1, max_size=2**24) as ws:
            for batch in range(12):
                await push(srv, {"job": "slow"},
                           [f"{batch}-{i} " + "x" * 4000 for i in range(1000)])
            # every line is either delivered or reported (12,000 drops stay under the
            # 10,000-record cap because the buffer and the socket hold thousands)
            received, dropped = 0, []
            deadline = time.monotonic() + 30
            while received + len(dropped) < 12_000:
                frame = json.loads(await asyncio.wait_for(ws.recv(),
                                                          deadline - time.monotonic()))
                received += sum(len(s["values"]) for s in frame["streams"])
                dropped += frame.get("dropped_entries", [])
            assert dropped and received + len(dropped) == 12_000
            assert all(d["labels"]["job"] == "slow" and int(d["timestamp"]) > 0 for d in dropped)
            # the session is still alive and delivers new lines
            await push(srv, {"job": "slow"}, ["after the storm"])
            got = await entries_until(ws, 1)
            assert got[0][1][1] == "after the storm"
    run(main())


def test_max_concurrent_tail_requests_is_a_per_tenant_limit(tmp_path):
    server = LogstoreServer(tmp_path / "d", {"auth_enabled": True, "limits_config": {
        "max_concurrent_tail_requests": 1}}).start()

    async def main():
        url = ws_url(server, query='{job="one"}')
        async with websockets.connect(url, additional_headers={"X-Scope-OrgID": "a"}):
            async with websockets.connect(url, additional_headers={"X-Scope-OrgID": "a"}) as extra:
                with pytest.raises(websockets.ConnectionClosedError) as info:
                    await extra.recv()
            assert (info.value.rcvd.code, info.value.rcvd.reason) == (
                1011, "max concurrent tail requests limit exceeded, count > limit (2 > 1)")
            # tenant b has its own allowance
            async with websockets.connect(url, additional_headers={"X-Scope-OrgID": "b"}) as ws:
                await push(server, {"job": "one"}, ["for b"], tenant="b")
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                assert frame["streams"][0]["values"][0][1] == "for b"
    try:
        run(main())
    finally:
        server.stop()
