"""Flush and shutdown (spec/http-api.md §12): /flush/tenant, /ingester/prepare_shutdown,
/ingester/shutdown, and SIGTERM while pushes are in flight."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading

import httpx
import pytest

from tests.helpers import JSON_HEADERS, PUSH, head_rows, now_ns, push_body


def head_and_sealed(db) -> tuple[int, int]:
    conn = sqlite3.connect(db)
    try:
        return (head_rows(conn), conn.execute(
            "SELECT coalesce(sum(rows), 0) FROM blocks WHERE NOT flags & 4").fetchone()[0])
    finally:
        conn.close()


def recent(n: int, tag: str = "x") -> list:
    t = now_ns()
    return [[str(t - i * 10**6), f"{tag} line {i}"] for i in range(n)]


def test_prepare_shutdown_marker(client):
    assert client.get("/ingester/prepare_shutdown").text == "unset"
    assert client.post("/ingester/prepare_shutdown").status_code == 204
    r = client.get("/ingester/prepare_shutdown")
    assert (r.status_code, r.text) == (200, "set")
    assert client.delete("/ingester/prepare_shutdown").status_code == 204
    assert client.get("/ingester/prepare_shutdown").text == "unset"


def test_shutdown_without_terminate_flushes_and_stops_the_ingester(client):
    client.post(PUSH, content=push_body({"app": "s"}, recent(20)), headers=JSON_HEADERS)
    db = client.app.state.services.db.path
    assert head_and_sealed(db) == (20, 0)  # recent lines: not due for sealing yet
    r = client.post("/ingester/shutdown", params={"terminate": "false"})
    assert r.status_code == 204
    assert head_and_sealed(db) == (0, 20)
    assert client.get("/ready").status_code == 503
    r = client.post(PUSH, content=push_body({"app": "s"}, recent(1)), headers=JSON_HEADERS)
    assert (r.status_code, r.text) == (503, "Ingester is stopping or already stopped.\n")
    r = client.post("/ingester/shutdown", params={"terminate": "false"})
    assert (r.status_code, r.text) == (503, "Ingester is stopping or already stopped.\n")
    # what was stored is still answered
    got = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="s"}', "start": str(now_ns() - 3600 * 10**9), "end": str(now_ns()),
        "limit": "100"}).json()["data"]["result"]
    assert sum(len(s["values"]) for s in got) == 20


def test_shutdown_flush_false_leaves_the_head(client):
    client.post(PUSH, content=push_body({"app": "s"}, recent(5)), headers=JSON_HEADERS)
    r = client.get("/ingester/shutdown", params={"terminate": "false", "flush": "false"})
    assert r.status_code == 204
    assert head_and_sealed(client.app.state.services.db.path) == (5, 0)


def test_shutdown_bad_parameter(client):
    r = client.post("/ingester/shutdown", params={"terminate": "maybe"})
    assert (r.status_code, r.text) == (400, "invalid terminate parameter: 'maybe'\n")
    assert client.get("/ready").status_code == 200


def test_flush_tenant_seals_only_that_tenant_and_selector(make_client):
    client = make_client({"auth_enabled": True})
    for tenant in ("a", "b"):
        for app in ("x", "y"):
            r = client.post(PUSH, content=push_body({"app": app}, recent(3, tenant)),
                            headers={**JSON_HEADERS, "X-Scope-OrgID": tenant})
            assert r.status_code == 204
    r = client.post("/flush/tenant", params={"streams": '{app="x"}'},
                    headers={"X-Scope-OrgID": "a"})
    assert r.status_code == 204
    conn = sqlite3.connect(client.app.state.services.db.path)
    sealed = conn.execute("SELECT s.tenant, s.labels FROM blocks b "
                          "JOIN streams s ON s.id = b.stream_id WHERE NOT b.flags & 4").fetchall()
    conn.close()
    assert sealed == [("a", '{app="x", service_name="x"}')]
    r = client.post("/flush/tenant", params={"streams": '{app="x"'},
                    headers={"X-Scope-OrgID": "a"})
    assert r.status_code == 400
    assert r.text.startswith("parse error")
    assert client.post("/flush/tenant").status_code == 401
    assert client.post("/flush/tenant", headers={"X-Scope-OrgID": "b"}).status_code == 204
    assert head_and_sealed(client.app.state.services.db.path) == (3, 9)


def test_sigterm_with_prepared_shutdown_seals_the_head_and_closes_cleanly(make_server):
    server = make_server()
    assert httpx.post(server.url + PUSH, content=push_body({"app": "p"}, recent(30)),
                      headers=JSON_HEADERS).status_code == 204
    assert httpx.post(server.url + "/ingester/prepare_shutdown").status_code == 204
    os.killpg(server.proc.pid, signal.SIGTERM)
    assert server.proc.wait(30) == 0
    db = server.data_dir / "logstore.db"
    assert head_and_sealed(db) == (0, 30)
    assert not (server.data_dir / "prepare-shutdown").exists()
    wal = server.data_dir / "logstore.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed before closing
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_shutdown_endpoint_terminates_the_server(make_server):
    server = make_server()
    assert httpx.post(server.url + PUSH, content=push_body({"app": "t"}, recent(7)),
                      headers=JSON_HEADERS).status_code == 204
    assert httpx.post(server.url + "/ingester/shutdown").status_code == 204
    assert server.proc.wait(30) == 0  # the process ends by itself
    assert head_and_sealed(server.data_dir / "logstore.db") == (0, 7)


def test_sigterm_during_pushes_loses_no_acknowledged_line(make_server):
    server = make_server()
    acked: list[str] = []
    lock = threading.Lock()
    started = threading.Event()

    def pusher(k: int) -> None:
        with httpx.Client(timeout=10) as http:
            for i in range(10_000):
                line = f"pusher {k} line {i}"
                try:
                    r = http.post(server.url + PUSH, headers=JSON_HEADERS, content=json.dumps(
                        {"streams": [{"stream": {"app": "drain", "k": str(k)},
                                      "values": [[str(now_ns()), line]]}]}))
                except httpx.HTTPError:
                    return
                if r.status_code != 204:
                    return
                with lock:
                    acked.append(line)
                    if len(acked) >= 50:
                        started.set()

    threads = [threading.Thread(target=pusher, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    assert started.wait(30)
    os.killpg(server.proc.pid, signal.SIGTERM)
    assert server.proc.wait(30) == 0
    for t in threads:
        t.join(30)
    server.start()
    got = httpx.get(server.url + "/logstore/api/v1/query_range", params={
        "query": '{app="drain"}', "start": str(now_ns() - 3600 * 10**9),
        "end": str(now_ns() + 10**9), "limit": "5000"}).json()["data"]["result"]
    stored = {v[1] for s in got for v in s["values"]}
    assert set(acked) <= stored
    assert len(acked) >= 50
