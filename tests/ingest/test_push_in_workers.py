"""Large push bodies decoded and validated in a query worker process while other pushes are
in the server (services/ingest/ingester.py, `PrepareJob`), against real servers: the
answers and what is stored are those of a server that does the work itself, a push alone
is done by the server, and a worker lost in the middle of a push leaves the push to the
server, with nothing lost."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import time

import httpx
import snappy

from proto import push_pb2
from services.ingest.ingester import ELSEWHERE_BYTES, ELSEWHERE_MAX_BYTES
from tests.helpers import query_worker_pids, stored
from tests.read.test_query_limits import _metric, _wait_for, in_thread

NS = 10**9
OLDEST = re.compile(r"is: \d{4}-\d\d-\d\dT[\d:.]+Z")
PUSH = "/logstore/api/v1/push"
JSON = {"Content-Type": "application/json"}
PROTO = {"Content-Type": "application/x-protobuf"}
# old lines are refused and new ones past the grace period too; long lines are cut
LIMITS = {"limits_config": {"reject_old_samples_max_age": "1h", "max_line_size": 600,
                            "max_line_size_truncate": False}}


def _lines(n: int, seed: int) -> list[str]:
    levels = ("info", "warn", "error", "debug")
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(f"level={levels[(i + seed) % 4]} method=GET path=/api/{i % 17} "
                       f"status={200 + i % 5} latency_ms={i % 97} user=u{i % 13} msg=\"ok {i}\"")
        elif i % 3 == 1:
            out.append(json.dumps({"level": levels[i % 4].upper(), "req": {"id": i, "seed": seed},
                                   "msg": "näive ✓ line"}))
        else:
            out.append(f"{seed} plain line {i} ERROR somewhere" if i % 7 == 0 else
                       f"{seed} plain line {i} nothing to see")
    return out


def _json_push(now: int, seed: int, bad: bool = False) -> bytes:
    streams = []
    for app in ("api", "web", "db"):
        values = [[str(now - 1800 * NS + i * 997_000_000 + seed), line]
                  for i, line in enumerate(_lines(120, seed))]
        values[5].append({"trace_id": f"t{seed}", "level": "warn"})  # metadata's level wins
        if bad and app == "web":
            values[3][0] = str(now - 3 * 3600 * NS)       # too old
            values[4][1] = "x" * 700                      # too long
            values[6][0] = str(now + 3600 * NS)           # too new
        streams.append({"stream": {"app": app, "env": "prod"}, "values": values})
    if bad:
        streams.append({"stream": {"app": "x", "0bad": "y"}, "values": [[str(now), "z"]]})
    body = json.dumps({"streams": streams}).encode()
    assert len(body) >= ELSEWHERE_BYTES
    return body


def _proto_push(now: int, seed: int) -> bytes:
    req = push_pb2.PushRequest()
    for app in ("api", "queue"):
        stream = req.streams.add()
        stream.labels = f'{{app="{app}", env="prod"}}'
        for i, line in enumerate(_lines(150, seed)):
            e = stream.entries.add()
            e.timestamp.seconds, e.timestamp.nanos = divmod(now - 1700 * NS + i * 1_003 * 10**6
                                                            + seed, NS)
            e.line = line
            if i % 50 == 0:
                md = e.structuredMetadata.add()
                md.name, md.value = "pod.name", f"p-{i}"
    raw = req.SerializeToString()
    assert len(raw) >= ELSEWHERE_BYTES  # what it inflates to decides
    return snappy.compress(raw)


def _pushes(now: int) -> list[tuple[bytes, dict]]:
    """Bodies that a worker prepares, then ones refused while decoding (there too)."""
    good = [(_json_push(now, 1), JSON), (_proto_push(now, 2), PROTO),
            (_json_push(now, 3, bad=True), JSON), (_json_push(now, 1), JSON)]  # a repeat
    refused = [(_json_push(now, 4)[:-3], JSON),                  # cut short
               (b"\xa0\x9c\x01" + b"\xff" * 100, PROTO),  # says 20,000 bytes, is not snappy
               (snappy.compress(b"\x0a\xff" * ELSEWHERE_BYTES), PROTO)]  # not a PushRequest
    return good + refused


@contextlib.contextmanager
def _another_push_in_flight(srv):
    """A push whose body is still arriving: the server counts it among its pushes."""
    with socket.create_connection(("127.0.0.1", srv.port)) as sock:
        sock.sendall(f"POST {PUSH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: 1000\r\n\r\n{\"streams\": [".encode())
        _wait_for(lambda: _metric(srv.url, "logstore_distributor_inflight_bytes") > 0)
        yield


def _start_a_worker(srv) -> None:
    """A query: evaluated in a worker, which has started and answered once it is done."""
    r = httpx.get(srv.url + "/logstore/api/v1/query", params={
        "query": 'count_over_time({env="prod"}[1m])', "time": str(time.time_ns())})
    assert r.status_code == 200, r.text
    assert _metric(srv.url, "logstore_query_workers_started_total") == 1


def _rollups(db_path: str) -> list[tuple]:
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute(
            "SELECT s.labels, r.minute, r.metadata, r.lines, r.bytes FROM rollups r "
            "JOIN streams s ON s.id = r.stream_id ORDER BY 1, 2, 3").fetchall()
    finally:
        conn.close()


def test_a_worker_answers_and_stores_as_the_server_does(make_server, tmp_path):
    now = time.time_ns()
    pushes = _pushes(now)
    answers, contents = [], []
    for workers in (0, 2):
        srv = make_server({**LIMITS, "querier": {"worker_processes": workers}},
                          data_dir=tmp_path / f"w{workers}")
        if workers:
            _start_a_worker(srv)
        with _another_push_in_flight(srv):
            got = [httpx.post(srv.url + PUSH, content=body, headers=headers)
                   for body, headers in pushes]
        # the oldest timestamp accepted moves with the clock
        answers.append([(r.status_code, OLDEST.sub("is: (now - 1h)", r.text)) for r in got])
        if workers:
            # the four bodies that decoded were prepared in workers, the others refused there
            assert _metric(srv.url, "logstore_query_worker_pushes_total") == 4
            assert _metric(srv.url, "logstore_query_workers_started_total") >= 1
        else:
            assert "logstore_query_worker_pushes" not in httpx.get(srv.url + "/metrics").text
        srv.stop()
        db = str(srv.data_dir / "logstore.db")
        contents.append((stored(db), _rollups(db)))
    assert answers[0] == answers[1]
    statuses = [status for status, _ in answers[1]]
    assert statuses == [204, 204, 400, 204, 400, 400, 400], answers[1]
    assert "timestamp too old" in answers[1][2][1] and "timestamp too new" in answers[1][2][1]
    assert "max entry size '600' bytes exceeded" in answers[1][2][1]
    assert answers[1][5][1] == "snappy: corrupt input\n"
    (rows, rollups), (rows_w, rollups_w) = contents
    assert len(rows) == 2 * 3 * 120 + 2 * 150 - 3 and rows_w == rows
    assert any(md and md.get("pod_name") == "p-50" for *_, md in rows)
    assert sum(r[3] for r in rollups) == len(rows) and rollups_w == rollups


def test_a_push_alone_is_done_by_the_server(make_server):
    srv = make_server({**LIMITS, "querier": {"worker_processes": 1}})
    _start_a_worker(srv)
    now = time.time_ns()
    for seed in (1, 2):  # one after the other, as one client sends them
        r = httpx.post(srv.url + PUSH, content=_json_push(now, seed), headers=JSON)
        assert r.status_code == 204, r.text
    assert _metric(srv.url, "logstore_query_worker_pushes_total") == 0
    with _another_push_in_flight(srv):
        r = httpx.post(srv.url + PUSH, content=_json_push(now, 3), headers=JSON)
    assert r.status_code == 204, r.text
    assert _metric(srv.url, "logstore_query_worker_pushes_total") == 1


def test_a_very_large_push_is_done_by_the_server(make_server):
    srv = make_server({**LIMITS, "querier": {"worker_processes": 1}})
    _start_a_worker(srv)
    now = time.time_ns()
    values = [[str(now - 1000 * NS + i), f"{i} " + "x" * 500] for i in range(9000)]
    body = json.dumps({"streams": [{"stream": {"app": "big"}, "values": values}]}).encode()
    assert len(body) > ELSEWHERE_MAX_BYTES
    with _another_push_in_flight(srv):
        r = httpx.post(srv.url + PUSH, content=body, headers=JSON, timeout=60)
        assert r.status_code == 204, r.text
        assert _metric(srv.url, "logstore_query_worker_pushes_total") == 0
        r = httpx.post(srv.url + PUSH, content=_json_push(now, 1), headers=JSON)
        assert r.status_code == 204, r.text
        assert _metric(srv.url, "logstore_query_worker_pushes_total") == 1


def test_the_push_that_starts_a_worker_does_not_wait_for_it(make_server):
    srv = make_server({**LIMITS, "querier": {"worker_processes": 1}})
    now = time.time_ns()
    with _another_push_in_flight(srv):
        r = httpx.post(srv.url + PUSH, content=_json_push(now, 1), headers=JSON)
        assert r.status_code == 204, r.text
        # no worker was running: one was started, and the push done here meanwhile
        assert _metric(srv.url, "logstore_query_workers_started_total") == 1
        assert _metric(srv.url, "logstore_query_worker_pushes_total") == 0
        _wait_for(lambda: _metric(srv.url, "logstore_query_workers") == 1)  # it is ready
        r = httpx.post(srv.url + PUSH, content=_json_push(now, 2), headers=JSON)
        assert r.status_code == 204, r.text
    assert _metric(srv.url, "logstore_query_worker_pushes_total") == 1
    assert _metric(srv.url, "logstore_query_workers_started_total") == 1


def test_a_worker_lost_mid_push_leaves_the_push_to_the_server(make_server):
    srv = make_server({**LIMITS, "querier": {"worker_processes": 1}})
    _start_a_worker(srv)
    now = time.time_ns()
    with _another_push_in_flight(srv):
        r = httpx.post(srv.url + PUSH, content=_json_push(now, 1), headers=JSON)
        assert r.status_code == 204, r.text
        assert _metric(srv.url, "logstore_query_worker_pushes_total") == 1
        pids = query_worker_pids(group=srv.proc.pid)
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGSTOP)  # it takes the next push and never answers
        try:
            thread, answer = in_thread(lambda: httpx.post(
                srv.url + PUSH, content=_json_push(now, 2), headers=JSON, timeout=60))
            _wait_for(lambda: _metric(srv.url, "logstore_query_worker_jobs") == 1)
        finally:
            os.kill(pids[0], signal.SIGKILL)
        thread.join()
    assert isinstance(answer[0], httpx.Response), answer
    assert answer[0].status_code == 204, answer[0].text
    assert _metric(srv.url, "logstore_query_worker_pushes_total") == 1  # done by the server
    # the next query finds the worker gone, counts it lost and starts another
    r = httpx.get(srv.url + "/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({env="prod"}[1h]))', "time": str(now)})
    assert r.json()["data"]["result"][0]["value"][1] == str(2 * 3 * 120)
    assert _metric(srv.url, "logstore_query_workers_lost_total") == 1
    assert _metric(srv.url, "logstore_query_workers_started_total") == 2


def test_a_push_waits_for_the_worker_that_prepares_another(make_server):
    """Every worker preparing a push: the next push waits for one to finish (a worker's
    push takes milliseconds) rather than taking the server's interpreter from HTTP and the
    writer; it goes to the worker once that answers."""
    srv = make_server({**LIMITS, "querier": {"worker_processes": 1}})
    _start_a_worker(srv)
    now = time.time_ns()
    pids = query_worker_pids(group=srv.proc.pid)
    assert len(pids) == 1, pids
    with _another_push_in_flight(srv):
        os.kill(pids[0], signal.SIGSTOP)  # holds the first push until it goes on
        try:
            first, first_answer = in_thread(lambda: httpx.post(
                srv.url + PUSH, content=_json_push(now, 1), headers=JSON, timeout=60))
            _wait_for(lambda: _metric(srv.url, "logstore_query_worker_jobs") == 1)
            second, second_answer = in_thread(lambda: httpx.post(
                srv.url + PUSH, content=_json_push(now, 2), headers=JSON, timeout=60))
            _wait_for(lambda: _metric(srv.url, "logstore_query_worker_push_waits") == 1)
            assert _metric(srv.url, "logstore_query_worker_pushes_total") == 0  # the state
        finally:
            os.kill(pids[0], signal.SIGCONT)
        first.join()
        second.join()
    for answer in (first_answer, second_answer):
        assert isinstance(answer[0], httpx.Response), answer
        assert answer[0].status_code == 204, answer[0].text
    assert _metric(srv.url, "logstore_query_worker_pushes_total") == 2  # both in the worker
    assert _metric(srv.url, "logstore_query_worker_push_waits") == 0


def _otlp(now: int, seed: int) -> dict:
    """OTLP/JSON: two resources (index labels from service.name and k8s.pod.name), records
    with attributes (structured metadata) and severities."""
    def attr(key, value):
        return {"key": key, "value": {"stringValue": value}}
    resources = []
    for pod in ("p1", "p2"):
        records = [{"timeUnixNano": str(now - 1500 * NS + i * 10**9 + seed),
                    "severityText": ("INFO", "WARN", "ERROR")[i % 3],
                    "body": {"stringValue": line},
                    "attributes": [attr("http.route", f"/r/{i % 7}")]}
                   for i, line in enumerate(_lines(100, seed))]
        resources.append({"resource": {"attributes": [attr("service.name", "shop"),
                                                      attr("k8s.pod.name", pod),
                                                      attr("host.name", "n1")]},
                          "scopeLogs": [{"scope": {"name": "otel.py"}, "logRecords": records}]})
    return {"resourceLogs": resources}


def test_an_otlp_push_in_a_worker_is_stored_as_the_server_stores_it(make_server, tmp_path):
    from tests.otlp.test_otlp import to_protobuf
    now = time.time_ns()
    bodies = [(to_protobuf(_otlp(now, 1)), "application/x-protobuf"),
              (json.dumps(_otlp(now, 2)).encode(), "application/json"),
              (b"\x0a\xff" * ELSEWHERE_BYTES, "application/x-protobuf")]  # not a request
    assert all(len(body) >= ELSEWHERE_BYTES for body, _ in bodies)
    answers, contents = [], []
    for workers in (0, 1):
        srv = make_server({"querier": {"worker_processes": workers}},
                          data_dir=tmp_path / f"w{workers}")
        if workers:
            _start_a_worker(srv)
        with _another_push_in_flight(srv):
            got = [httpx.post(srv.url + "/otlp/v1/logs", content=body,
                              headers={"Content-Type": media}) for body, media in bodies]
        answers.append([(r.status_code, r.content) for r in got])
        if workers:
            assert _metric(srv.url, "logstore_query_worker_pushes_total") == 2
        srv.stop()
        contents.append(stored(str(srv.data_dir / "logstore.db")))
    assert answers[0] == answers[1]
    assert [status for status, _ in answers[1]] == [204, 204, 400]
    assert b"failed to unmarshal request" in answers[1][2][1]
    assert len(contents[1]) == 2 * 2 * 100 and contents[1] == contents[0]
    labels, md = contents[1][0][1], contents[1][0][4]
    assert "k8s_pod_name" in labels and md["http_route"] == "/r/0" and md["host_name"] == "n1"


def test_a_live_tail_gets_every_line_of_a_push_a_worker_prepared(make_server):
    """A worker sends a pack's rows back as columns (storage/row_columns.py); the server makes
    lines of them only for a reader such as a live tail, which gets each line as pushed."""
    import asyncio
    from urllib.parse import urlencode

    import websockets

    srv = make_server({**LIMITS, "querier": {"worker_processes": 1}})
    _start_a_worker(srv)
    now = time.time_ns()
    body = _json_push(now, 7)
    sent = {(ts, line) for s in json.loads(body)["streams"] for ts, line, *_ in s["values"]}
    url = srv.url.replace("http://", "ws://") + "/logstore/api/v1/tail?" + urlencode(
        {"query": '{env="prod"}', "limit": "1"})

    async def main() -> set[tuple[str, str]]:
        got: set[tuple[str, str]] = set()
        async with websockets.connect(url) as ws:
            with _another_push_in_flight(srv):
                r = await asyncio.to_thread(httpx.post, srv.url + PUSH, content=body,
                                            headers=JSON)
                assert r.status_code == 204, r.text
            assert _metric(srv.url, "logstore_query_worker_pushes_total") == 1
            while len(got) < len(sent):
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                got.update((v[0], v[1]) for s in frame["streams"] for v in s["values"])
        return got

    assert asyncio.run(main()) == sent
