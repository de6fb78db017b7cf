"""Pushes answered from the push log under load (services/ingest/pending.py,
storage/push_log.py), against real servers: what they store and answer is what the same
pushes pushed one at a time store and answer; a read right after the answer finds the
lines; a start stores what the log holds, once; a record cut short is not stored; a server
killed while pushes are answered keeps every answered push."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest
import snappy

from proto import push_pb2
from services.ingest.decode import JSON_MEDIA, decode_body
from routes.after_pushes import after_pushes
from services.ingest.pending import PendingPushes, append_for
from services.ingest.records import checked_push, prepare_records
from services.ingest.prepare import Preparer
from services.runtime.limits import Limits
import config as config_module
from storage.backup import backup
from storage.db import Database
from storage.push_log import DIRNAME, HEADER, PushLog, read_payloads
from tests.helpers import query_worker_pids, stored
from tests.ingest.test_push_in_workers import (_another_push_in_flight, _rollups,
                                               _start_a_worker)
from tests.read.test_query_limits import _metric, _wait_for, in_thread

NS = 10**9
HOUR = 3600 * NS
PUSH = "/logstore/api/v1/push"
JSON = {"Content-Type": "application/json"}
PROTO = {"Content-Type": "application/x-protobuf"}


def _line(i: int, seed: int) -> str:
    if i % 3 == 0:
        return (f"ts=2026-11-28 level={('info', 'warn', 'error')[i % 3]} method=GET "
                f"path=/api/{i % 7} status={200 + i % 5} latency_ms={i % 97} user=u{seed} "
                f"msg=\"ok {i}\"")
    if i % 3 == 1:
        return json.dumps({"level": "ERROR" if i % 5 == 0 else "info",
                           "req": {"id": i, "seed": seed}, "msg": "näive ✓"})
    return f"{seed} plain line {i}"


def _json_body(start: int, seed: int, streams: tuple[str, ...] = ("api", "web"),
               lines: int = 60, step: int = 997_000_000) -> bytes:
    return json.dumps({"streams": [
        {"stream": {"app": app, "env": "prod"},
         "values": [[str(start + i * step + seed), _line(i, seed)] for i in range(lines)]}
        for app in streams]}).encode()


def _proto_body(start: int, seed: int) -> bytes:
    req = push_pb2.PushRequest()
    stream = req.streams.add()
    stream.labels = '{app="queue", env="prod"}'
    for i in range(80):
        e = req.streams[0].entries.add()
        e.timestamp.seconds, e.timestamp.nanos = divmod(start + i * 1_003_000_000 + seed, NS)
        e.line = _line(i, seed)
    return snappy.compress(req.SerializeToString())


def _pushes(now: int) -> list[tuple[bytes, dict]]:
    """Bodies the log takes: streams pushed twice (merged in a batch), a stream across the
    hour (two packs), a stream of a few lines (rows of `entries`), a push that repeats
    another exactly (its lines are stored once), protobuf."""
    hour = now - now % HOUR - HOUR
    return [(_json_body(hour - 40 * NS, 1), JSON),
            (_json_body(hour + 30 * NS, 2), JSON),
            (_json_body(hour - 20 * NS, 3, ("api", "web", "db"), lines=70), JSON),
            (_json_body(hour + 90 * NS, 4, ("tiny",), lines=5), JSON),
            (_json_body(hour - 40 * NS, 1), JSON),
            (_proto_body(hour - 10 * NS, 5), PROTO)]


def _count(url: str, now: int) -> int:
    r = httpx.get(url + "/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({env="prod"}[3h]))', "time": str(now)})
    assert r.status_code == 200, r.text
    result = r.json()["data"]["result"]
    return int(result[0]["value"][1]) if result else 0


def test_pushes_under_load_store_and_answer_what_pushes_one_at_a_time_do(make_server,
                                                                         tmp_path):
    now = time.time_ns()
    contents, answers = [], []
    for loaded in (False, True):
        srv = make_server({"querier": {"worker_processes": 1}},
                          data_dir=tmp_path / f"loaded-{loaded}")
        if loaded:
            _start_a_worker(srv)  # the log's batches count on a worker free of queries
            with _another_push_in_flight(srv):
                got = [httpx.post(srv.url + PUSH, content=b, headers=h) for b, h in
                       _pushes(now)]
                assert _metric(srv.url, "logstore_push_log_pushes_total") == 6  # the state
                # read while the pushes may still wait in the log: the read waits for them
                counted = _count(srv.url, now)
        else:
            got = [httpx.post(srv.url + PUSH, content=b, headers=h) for b, h in _pushes(now)]
            assert _metric(srv.url, "logstore_push_log_pushes_total") == 0
            counted = _count(srv.url, now)
        answers.append([(r.status_code, r.text) for r in got])
        srv.stop()
        db = str(srv.data_dir / "logstore.db")
        contents.append((counted, stored(db), _rollups(db)))
    assert answers[0] == answers[1] == [(204, "")] * 6
    (count, rows, rollups), (count_l, rows_l, rollups_l) = contents
    assert count == len(rows) == 2 * 60 + 2 * 60 + 3 * 70 + 5 + 80  # the repeat left out
    assert count_l == count
    assert rows_l == rows
    assert rollups_l == rollups
    assert any(md == {"detected_level": "error"} for *_, md in rows)


def test_a_stream_limit_refuses_under_load_what_it_refuses_otherwise(make_server, tmp_path):
    now = time.time_ns()
    limits = {"limits_config": {"max_global_streams_per_user": 2},
              "querier": {"worker_processes": 1}}
    body = _json_body(now - HOUR, 7, ("a", "b", "c"))
    answers = []
    for loaded in (False, True):
        srv = make_server(limits, data_dir=tmp_path / f"loaded-{loaded}")
        if loaded:
            _start_a_worker(srv)
            with _another_push_in_flight(srv):
                r = httpx.post(srv.url + PUSH, content=body, headers=JSON)
                assert _metric(srv.url, "logstore_push_log_pushes_total") == 1
        else:
            r = httpx.post(srv.url + PUSH, content=body, headers=JSON)
        answers.append((r.status_code, r.text, _count(srv.url, now)))
    assert answers[0] == answers[1]
    assert answers[0][0] == 429 and answers[0][2] == 2 * 60, answers[0]


def _record(tenant: str, body: bytes, now: int) -> bytes:
    lim = Limits(config_module.Config().limits_config).of(tenant)
    checked = checked_push(Preparer(), tenant, decode_body(JSON_MEDIA, body, 1 << 30, None),
                           now, lim)
    assert checked is not None
    return checked.payload


def _write_log(data_dir: Path, payloads: list[bytes]) -> Path:
    """The records written by the server's own PushLog, as a server killed after
    answering them would have left them."""
    log = PushLog(str(data_dir / DIRNAME))

    async def write() -> None:
        assert log.open(0) == []
        for payload in payloads:
            _, done = log.submit(payload)
            await done

    asyncio.run(write())
    log.close()
    [segment] = (data_dir / DIRNAME).iterdir()
    return segment


def _applied(data_dir: Path) -> int:
    conn = sqlite3.connect(data_dir / "logstore.db")
    try:
        return conn.execute("SELECT applied FROM push_log").fetchone()[0]
    finally:
        conn.close()


def test_a_start_stores_what_the_log_holds_once(make_server, tmp_path):
    now = time.time_ns()
    data = tmp_path / "data"
    make_server(data_dir=data).stop()  # a database, migrated, nothing in it
    first, second = _json_body(now - HOUR, 1), _json_body(now - HOUR, 2, ("db",))
    segment = _write_log(data, [_record("fake", first, now), _record("fake", second, now)])
    # the first record counts as stored already (as after a batch committed, before its
    # segment was emptied): a start must not store it again
    conn = sqlite3.connect(data / "logstore.db")
    conn.execute("UPDATE push_log SET applied = 1")
    conn.commit()
    conn.close()
    assert stored(str(data / "logstore.db")) == []
    assert segment.stat().st_size > 0
    srv = make_server(data_dir=data)
    assert _count(srv.url, now) == 60
    assert _applied(data) == 2
    assert not segment.exists()  # all of it stored: removed
    srv.stop()
    srv = make_server(data_dir=data)
    assert _count(srv.url, now) == 60


def test_a_record_cut_short_is_not_stored_and_the_log_goes_on(make_server, tmp_path):
    now = time.time_ns()
    data = tmp_path / "data"
    make_server(data_dir=data).stop()
    segment = _write_log(data, [_record("fake", _json_body(now - HOUR, 1, ("a",)), now),
                                _record("fake", _json_body(now - HOUR, 2, ("b",)), now)])
    whole = segment.read_bytes()
    length = HEADER.unpack_from(whole)[0]
    second = HEADER.size + length  # where the second record begins
    with open(segment, "r+b") as f:  # the second record's sync never completed
        f.truncate(len(whole) - 10)
    assert len(whole) - 10 > second
    srv = make_server({"querier": {"worker_processes": 1}}, data_dir=data)
    assert _count(srv.url, now) == 60
    _start_a_worker(srv)
    with _another_push_in_flight(srv):
        r = httpx.post(srv.url + PUSH, content=_json_body(now - HOUR, 3, ("c",)),
                       headers=JSON)
        assert r.status_code == 204, r.text
        assert _metric(srv.url, "logstore_push_log_pushes_total") == 1
    assert _count(srv.url, now) == 120
    srv.stop()
    srv = make_server(data_dir=data)
    assert _count(srv.url, now) == 120


def test_a_server_killed_under_load_keeps_every_answered_push(make_server, tmp_path):
    now = time.time_ns()
    data = tmp_path / "data"
    srv = make_server({"querier": {"worker_processes": 1}}, data_dir=data)
    _start_a_worker(srv)
    answered: list[int] = []
    stop = threading.Event()
    lock = threading.Lock()
    next_batch = iter(range(10_000))

    def client() -> None:
        with httpx.Client(timeout=30) as http:
            while not stop.is_set():
                with lock:
                    batch = next(next_batch)
                body = _json_body(now - 2 * HOUR + batch * 60 * NS, batch, (f"b{batch}",),
                                  lines=200, step=250_000_000)
                try:
                    r = http.post(srv.url + PUSH, content=body, headers=JSON)
                except httpx.HTTPError:
                    return  # the server is gone
                if r.status_code == 204:
                    with lock:
                        answered.append(batch)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                if len(answered) >= 40:
                    break
            time.sleep(0.01)  # polling the clients' progress, with a deadline
        pushes_logged = _metric(srv.url, "logstore_push_log_pushes_total")
        os.killpg(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(10)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert len(answered) >= 40 and pushes_logged > 0  # the state: answered from the log
    with lock:
        kept = sorted(answered)
    srv = make_server(data_dir=data)
    r = httpx.get(srv.url + "/logstore/api/v1/query", params={
        "query": 'sum by (app) (count_over_time({env="prod"}[4h]))', "time": str(now)})
    assert r.status_code == 200, r.text
    counts = {int(s["metric"]["app"][1:]): int(s["value"][1]) for s in r.json()["data"]["result"]}
    assert all(counts.get(batch) == 200 for batch in kept), \
        [(b, counts.get(b)) for b in kept if counts.get(b) != 200]


@pytest.mark.parametrize("damage", ["checksum", "length"])
def test_a_damaged_record_ends_what_a_start_reads(tmp_path, damage):
    payloads = [b"one" * 10, b"two" * 10, b"three" * 10]
    segment = _write_log(tmp_path, payloads)
    data = bytearray(segment.read_bytes())
    second = HEADER.size + len(payloads[0])
    if damage == "checksum":
        data[second + HEADER.size] ^= 0xFF  # the second record's first byte
    else:
        data[second:second + 4] = (1 << 30).to_bytes(4, "little")  # longer than the file
    segment.write_bytes(bytes(data))
    again = PushLog(str(tmp_path / DIRNAME))
    assert again.open(0) == [(1, payloads[0])]
    again.close()


def test_a_read_waits_for_the_pushes_answered_before_it(tmp_path):
    """The HTTP edge's wait (routes/after_pushes.py) over the real log and database; the
    batch's preparation is held at a gate, so the push is answered and not yet stored."""
    now = time.time_ns()
    data = tmp_path / "data"

    async def run() -> None:
        db = Database(str(data))
        db.open()
        gate = asyncio.Event()

        async def prepare_after_gate(locations, limits, now_ns, window_ns):
            await gate.wait()
            return prepare_records(Preparer(), read_payloads(locations), limits, now_ns,
                                   window_ns)

        limits = Limits(config_module.Config().limits_config)
        pending = PendingPushes(db, PushLog(str(data / DIRNAME)), limits.of,
                                append_for(db, HOUR), lambda tenant, result: None,
                                prepare_elsewhere=prepare_after_gate, window_ns=HOUR)
        await pending.start()
        await pending.admit("fake", _record("fake", _json_body(now - HOUR, 1), now))
        assert pending.newest_written > pending.applied  # the state: answered, not stored
        reached: list[tuple[str, int]] = []

        async def handler(scope, receive, send) -> None:  # what a request reached would read
            reached.append((scope["path"], len(stored(db.path))))

        edge = after_pushes(handler, pending)
        read = asyncio.create_task(edge({"type": "http", "path": "/logstore/api/v1/query"},
                                        None, None))
        await edge({"type": "http", "path": PUSH}, None, None)  # a push does not wait
        assert reached == [(PUSH, 0)]
        gate.set()
        await read
        assert reached == [(PUSH, 0), ("/logstore/api/v1/query", 2 * 60)]
        await pending.stop()
        db.close()

    asyncio.run(run())


def test_a_backup_holds_the_pushes_the_log_holds(make_server, tmp_path):
    now = time.time_ns()
    data, dest = tmp_path / "data", tmp_path / "backup"
    make_server(data_dir=data).stop()
    _write_log(data, [_record("fake", _json_body(now - HOUR, 1), now)])
    assert stored(str(data / "logstore.db")) == []  # the state: in the log alone
    assert backup(str(data), str(dest)).pages > 0
    assert sorted(p.name for p in dest.iterdir()) == ["logstore.db", DIRNAME]
    srv = make_server(data_dir=dest)
    assert _count(srv.url, now) == 2 * 60


def test_a_push_takes_the_commit_path_while_queries_hold_every_worker(make_server):
    """The log's batches are prepared in a query worker; while every worker runs a query,
    a batch would be prepared on the server's interpreter, which the pushes share."""
    now = time.time_ns()
    srv = make_server({"querier": {"worker_processes": 1}})
    _start_a_worker(srv)
    [pid] = query_worker_pids(group=srv.proc.pid)
    os.kill(pid, signal.SIGSTOP)  # the query below stays in the worker until it goes on
    try:
        query, answer = in_thread(lambda: _count(srv.url, now))
        _wait_for(lambda: _metric(srv.url, "logstore_query_worker_jobs") == 1)  # the state
        with _another_push_in_flight(srv):
            r = httpx.post(srv.url + PUSH, content=_json_body(now - HOUR, 1), headers=JSON)
            assert r.status_code == 204, r.text
        assert _metric(srv.url, "logstore_push_log_pushes_total") == 0
    finally:
        os.kill(pid, signal.SIGCONT)
    query.join()
    assert answer == [0] or answer == [2 * 60], answer
    assert _count(srv.url, now) == 2 * 60
