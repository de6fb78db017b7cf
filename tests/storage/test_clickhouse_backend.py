"""`storage.backend: clickhouse` as a user runs it: the config keys that start it and the
errors for bad ones, data that comes back after a restart, duplicates stored once across
restarts and within one group commit, a killed server that acknowledged a push, and a
ClickHouse that cannot be reached (503, nothing acknowledged).

The read paths themselves run in the storage matrix's `clickhouse` state
(tests/storage_matrix.py); these are what the matrix cannot show."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

import config as config_module
from app import create_app
from tests.conftest import LogstoreServer
from tests.helpers import (HEAD_ROWS, JSON_HEADERS, PUSH, now_ns, push_body,
                           run_copy_to_clickhouse)
from tests.storage_matrix import MatrixClient

NS = 10**9


def _config(tmp_path, **clickhouse) -> dict:
    return {"common": {"path_prefix": str(tmp_path / "data")},
            "storage": {"backend": "clickhouse",
                        "clickhouse": {"url": f"chdb://{tmp_path / 'ch'}", **clickhouse}}}


def _client(data: dict) -> MatrixClient:
    from litestar.testing import TestClient
    return TestClient(create_app(config_module.config_from_dict(data)))


def _lines(c, query: str, start: int, end: int) -> list:
    r = c.get("/logstore/api/v1/query_range", params={
        "query": query, "start": str(start), "end": str(end), "limit": "1000",
        "direction": "forward"})
    assert r.status_code == 200, r.text
    return [(s["stream"], s["values"]) for s in r.json()["data"]["result"]]


def _sqlite_rows(c) -> int:
    import sqlite3
    conn = sqlite3.connect(c.app.state.services.db.path)
    try:
        return conn.execute("SELECT count(*) FROM entries").fetchone()[0] + \
            conn.execute("SELECT count(*) FROM blocks").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("storage, error", [
    ({"backend": "mysql"}, "storage.backend must be sqlite or clickhouse, not 'mysql'"),
    ({"backend": "clickhouse"},
     "storage.clickhouse.url must be chdb:///a/directory or http(s)://host:port"),
    ({"backend": "clickhouse", "clickhouse": {"url": "tcp://h:9000"}},
     "storage.clickhouse.url must be chdb:///a/directory or http(s)://host:port"),
    ({"backend": "clickhouse", "clickhouse": {"url": "chdb://relative/dir"}},
     "chdb:// takes an absolute directory"),
    ({"backend": "clickhouse", "clickhouse": {"url": "chdb:///x", "database": "logs; DROP"}},
     "storage.clickhouse.database must be a plain identifier"),
    ({"backend": "clickhouse", "clickhouse": {"url": "chdb:///x", "passwd": "p"}},
     "passwd"),
])
def test_bad_backend_settings_are_refused_with_the_key(storage, error):
    with pytest.raises(config_module.ConfigError) as info:
        config_module.config_from_dict({"storage": storage})
    assert error in str(info.value)


def test_lines_come_back_after_a_restart_and_repeats_stay_single(tmp_path):
    t = now_ns() - 60 * NS
    values = [[str(t + i * NS), f"line {i} level=info"] for i in range(20)]
    body = push_body({"app": "a", "env": "prod"}, values)
    data = _config(tmp_path)
    with _client(data) as c:
        assert c.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
        before = _lines(c, '{app="a"}', t - NS, t + 60 * NS)
        # the state: every line in ClickHouse, none in the SQLite file
        assert c.app.state.services.querier.store.rows() == 20
        assert _sqlite_rows(c) == 0
    assert [len(v) for _, v in before] == [20]
    with _client(data) as c:  # the writer knows nothing of the stream now
        assert _lines(c, '{app="a"}', t - NS, t + 60 * NS) == before
        assert c.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
        # half old, half new: only the new half is stored
        more = [[str(t + i * NS), f"line {i} level=info"] for i in range(10, 30)]
        assert c.post(PUSH, content=push_body({"app": "a", "env": "prod"}, more),
                      headers=JSON_HEADERS).status_code == 204
        assert c.app.state.services.querier.store.rows() == 30
        after = _lines(c, '{app="a"}', t - NS, t + 60 * NS)
        assert [v[1] for v in after[0][1]] == [f"line {i} level=info" for i in range(30)]
        r = c.get("/logstore/api/v1/series", params={
            "match[]": '{env="prod"}', "start": str(t - NS), "end": str(t + 60 * NS)})
        assert r.json()["data"] == [{"app": "a", "env": "prod", "service_name": "a"}]


def test_pushes_in_one_group_commit_store_a_repeat_once(tmp_path):
    """Pushes that wait for the writer together are one insert: a line two of them carry
    is stored once, and each caller is answered."""
    t = now_ns() - 60 * NS
    values = [[str(t + i * NS), f"same {i}"] for i in range(5)]
    with _client(_config(tmp_path)) as c:
        ingester = c.app.state.services.ingester
        from services.ingest.decode import decode_json

        async def together():
            raw = decode_json(push_body({"app": "g"}, values))
            return await asyncio.gather(*(ingester.push("fake", raw) for _ in range(8)))

        outcomes = c.blocking_portal.call(together)
        assert [o.accepted_lines for o in outcomes] == [5] * 8
        store = c.app.state.services.querier.store
        assert store.rows() == 5
        assert sum(o.result.inserted for o in outcomes) == 5


def test_a_line_twice_in_one_push_is_stored_once(tmp_path):
    t = now_ns() - 60 * NS
    values = [[str(t + i * NS), f"twice {i}"] for i in range(5)]
    body = json.dumps({"streams": [{"stream": {"app": "d"}, "values": values},
                                   {"stream": {"app": "d"}, "values": values}]})
    with _client(_config(tmp_path)) as c:
        assert c.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
        assert c.app.state.services.querier.store.rows() == 5
        got = _lines(c, '{app="d"}', t - NS, t + 60 * NS)
        assert [v[1] for v in got[0][1]] == [f"twice {i}" for i in range(5)]


def test_an_unreachable_clickhouse_answers_503_and_acknowledges_nothing(tmp_path):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = {"common": {"path_prefix": str(tmp_path / "data")},
            "storage": {"backend": "clickhouse",
                        "clickhouse": {"url": f"http://127.0.0.1:{port}"}}}
    with _client(data) as c:
        r = c.get("/ready")
        assert r.status_code == 503
        assert "log store" in r.text
        r = c.post(PUSH, content=push_body({"app": "a"}, [[str(now_ns()), "x"]]),
                   headers=JSON_HEADERS)
        assert r.status_code == 503, r.text
        assert "cannot take the push" in r.text
        r = c.get("/logstore/api/v1/labels")
        assert r.status_code == 503, r.text
        assert _sqlite_rows(c) == 0


def test_a_killed_server_keeps_what_it_acknowledged(tmp_path):
    """A real `logstore serve` on chdb, SIGKILLed after a push was answered 204: started
    again on the same directories, every acknowledged line is there."""
    data_dir = tmp_path / "data"
    extra = {"storage": {"backend": "clickhouse",
                         "clickhouse": {"url": f"chdb://{tmp_path / 'ch'}"}}}
    t = now_ns() - 60 * NS
    srv = LogstoreServer(data_dir, extra).start(timeout=60)
    try:
        for k in range(5):
            values = [[str(t + (k * 100 + i) * 10**6), f"batch {k} line {i}"]
                      for i in range(100)]
            r = httpx.post(srv.url + PUSH, content=push_body({"app": "k"}, values),
                           headers=JSON_HEADERS, timeout=30)
            assert r.status_code == 204, r.text
    finally:
        srv.kill()
    srv = LogstoreServer(data_dir, extra).start(timeout=60)
    try:
        r = httpx.get(srv.url + "/logstore/api/v1/query", params={
            "query": 'count_over_time({app="k"}[2h])', "time": str(t + 3600 * NS)},
            timeout=30)
        assert r.status_code == 200, r.text
        assert json.loads(r.text)["data"]["result"][0]["value"][1] == "500"
    finally:
        srv.stop()


def _answers(c, t: int) -> list:
    p = {"start": str(t - NS), "end": str(t + 3600 * NS)}
    out = []
    for path, params in [
            ("/logstore/api/v1/query_range", {"query": '{env="prod"}', "limit": "1000", **p}),
            ("/logstore/api/v1/query_range", {"query": 'sum by (app) (count_over_time('
                                              '{env="prod"} |= "error" [1m]))', "step": "60",
                                              **p}),
            ("/logstore/api/v1/series", {"match[]": '{env="prod"}', **p}),
            ("/logstore/api/v1/label/app/values", p),
            ("/logstore/api/v1/index/stats", {"query": '{env="prod"}', **p})]:
        r = c.get(path, params=params)
        assert r.status_code == 200, r.text
        data = r.json()
        out.append(data["data"]["result"] if "result" in data.get("data", {}) else
                   data.get("data", data))
    return out


def test_copy_to_clickhouse_moves_every_line_and_can_run_again(tmp_path):
    """A SQLite data directory (lines sealed and in the head, two tenants) copied with the
    real CLI answers the same on ClickHouse; a second run copies nothing more."""
    # the lines' minute within one hour of the previous one, whatever the time: a stream's
    # head is one chunk to SQLite's index/stats, where ClickHouse counts the stream's hours
    # (the test failed when its lines crossed an hour)
    hour = 3600 * NS
    now = now_ns()
    t = now - now % hour - hour + 60 * NS
    # only /flush seals: the state below is the one asserted, whatever the time of the hour
    sqlite_cfg = {"common": {"path_prefix": str(tmp_path / "data")}, "auth_enabled": True,
                  "storage": {"sealing_enabled": False}}
    with _client(sqlite_cfg) as c:
        for tenant in ("t1", "t2"):
            for app in ("a", "b"):
                values = [[str(t + i * NS), f"{app} {tenant} {'error' if i % 4 else 'ok'} {i}"]
                          for i in range(60)]
                r = c.post(PUSH, content=push_body({"app": app, "env": "prod"}, values),
                           headers={**JSON_HEADERS, "X-Scope-OrgID": tenant})
                assert r.status_code == 204, r.text
            if tenant == "t1":  # t1's lines sealed, t2's in the head
                token = c.app.state.services.config.server.admin_token
                assert c.post("/flush", headers={"Authorization": f"Bearer {token}"}
                              if token else {}).status_code == 204
        import sqlite3
        conn = sqlite3.connect(c.app.state.services.db.path)
        head, sealed = conn.execute(f"SELECT {HEAD_ROWS}, (SELECT coalesce(sum(rows), 0) "
                                    "FROM blocks WHERE NOT flags & 4)").fetchone()
        conn.close()
        assert head == 120 and sealed == 120  # the state: both kinds of storage hold lines
        want = {tenant: _answers(_Tenant(c, tenant), t) for tenant in ("t1", "t2")}
    for run, new in ((1, "240 new"), (2, "0 new")):
        out = run_copy_to_clickhouse({
            **sqlite_cfg, "storage": {"clickhouse": {"url": f"chdb://{tmp_path / 'ch'}"}}},
            tmp_path / "copy.yaml")
        assert new in out.stdout, out.stdout
        assert "verified: 240 lines in both" in out.stdout, out.stdout
    with _client({**_config(tmp_path), "auth_enabled": True}) as c:
        for tenant in ("t1", "t2"):
            assert _answers(_Tenant(c, tenant), t) == want[tenant]


class _Tenant:
    """A client whose requests carry one org id."""

    def __init__(self, client, tenant: str):
        self.client, self.tenant = client, tenant

    def get(self, path: str, **kw):
        return self.client.get(path, headers={"X-Scope-OrgID": self.tenant}, **kw)


def test_flush_merges_and_metrics_show_the_bytes_clickhouse_keeps(tmp_path):
    t = now_ns() - 60 * NS
    with _client(_config(tmp_path)) as c:
        for k in range(3):  # three pushes, three parts
            values = [[str(t + (k * 10 + i) * NS), f"part {k} line {i}"] for i in range(10)]
            assert c.post(PUSH, content=push_body({"app": "m"}, values),
                          headers=JSON_HEADERS).status_code == 204
        store = c.app.state.services.querier.store
        parts = "SELECT count() FROM system.parts WHERE database = {d:String} " \
                "AND table = 'entries' AND active"
        assert store.client.query(parts, {"d": store.db})[0][0] == 3  # the state
        token = c.app.state.services.config.server.admin_token
        r = c.post("/flush", headers={"Authorization": f"Bearer {token}"} if token else {})
        assert r.status_code == 204
        assert store.client.query(parts, {"d": store.db})[0][0] == 1
        text = c.get("/metrics").text
        line = next(x for x in text.splitlines()
                    if x.startswith("logstore_clickhouse_size_bytes "))
        assert float(line.split()[1]) > 0
        got = _lines(c, '{app="m"}', t - NS, t + 60 * NS)
        assert len(got[0][1]) == 30


def test_a_statement_running_past_the_deadline_is_a_query_timeout(tmp_path):
    """ClickHouse is told the time a read has left: a statement that would run past it
    is stopped there and the read ends as a timeout (504), not a store failure (503)."""
    import time

    from logql.errors import QueryTimeout

    with _client(_config(tmp_path)) as c:
        store = c.app.state.services.querier.store
        reader = store.reader(None, time.monotonic() + 1)
        endless = "SELECT sum(number) FROM numbers(1000000000000)"
        with pytest.raises(QueryTimeout):
            reader.client.query(endless)
        # without a deadline the same client is not bounded (a cheap statement proves it
        # reaches ClickHouse at all)
        assert store.reader(None, None).client.query("SELECT 1") == [[1]]
