"""What the Grafana API answers when several requests, on one node or on two nodes of a
cluster, create the same object at once, and when the cluster's PostgreSQL goes away and
comes back (docs/scale-out.md)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from contextlib import ExitStack

import pytest
from litestar.testing import TestClient

import config as config_module
from app import create_app
from tests.grafana.conftest import ADMIN, Fixture, grafana_config

RACERS = 6
SAME_UID = {"message": "The dashboard has been changed by someone else",
            "status": "version-mismatch"}
# what racer i posts (they differ in all but the contested name), and what all but one get
CREATES = {
    "dashboard uid": ("/api/dashboards/db",
                      lambda i: {"dashboard": {"uid": "same", "title": f"Racer {i}"}},
                      412, SAME_UID),
    "folder uid": ("/api/folders", lambda i: {"uid": "same", "title": f"Racer {i}"}, 409,
                   {"message": "a folder/dashboard with the same uid already exists"}),
    # no unique index holds this one: only the isolation of the check and the insert does
    "folder title": ("/api/folders", lambda i: {"title": "Same"}, 409,
                     {"message": "a folder with the same name already exists in this parent"}),
    "team name": ("/api/teams", lambda i: {"name": "same"}, 409, {"message": "Team name taken"}),
}


def _nodes(fx: Fixture, stack: ExitStack, tmp_path) -> list[TestClient]:
    """fx's node and, on PostgreSQL, a second node of the same cluster (one database)."""
    url = fx.client.app.state.services.config.storage.shared.url
    if not url:
        return [fx.client]  # one SQLite file has one node
    cfg = config_module.config_from_dict(grafana_config(tmp_path / "node-2", url))
    return [fx.client, stack.enter_context(TestClient(create_app(cfg)))]


@pytest.mark.parametrize("case", list(CREATES))
def test_concurrent_creates_of_one_object_make_it_once(fresh, tmp_path, case):
    path, body, status, refusal = CREATES[case]
    start = threading.Barrier(RACERS)
    answers: list[tuple[int, dict]] = []

    def create(client: TestClient, i: int) -> None:
        start.wait()
        r = client.post(path, json=body(i), auth=ADMIN)
        answers.append((r.status_code, r.json()))

    with ExitStack() as stack:
        nodes = _nodes(fresh, stack, tmp_path)
        threads = [threading.Thread(target=create, args=(nodes[i % len(nodes)], i))
                   for i in range(RACERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert Counter(code for code, _ in answers) == {200: 1, status: RACERS - 1}, answers
    assert all(answer == refusal for code, answer in answers if code != 200)


UNAVAILABLE = "the Grafana database is unavailable: the shared state (PostgreSQL) cannot be " \
              "reached: "
FAILING = {"commit": "logstore", "database": "failing", "version": "11.3.0"}


def _at_once(client: TestClient, n: int) -> None:
    threads = [threading.Thread(target=client.get, args=("/api/search",),
                                kwargs={"auth": ADMIN}) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_grafana_answers_503_while_its_postgresql_is_away_and_serves_once_it_is_back(tmp_path):
    from tests.postgres import start_server

    server = start_server()  # its own: stopping the shared one would break other tests
    try:
        cfg = config_module.config_from_dict(grafana_config(tmp_path / "data",
                                                            server.fresh_database()))
        with TestClient(create_app(cfg)) as client:
            r = client.post("/api/folders", json={"uid": "kept", "title": "Kept"}, auth=ADMIN)
            assert r.status_code == 200, r.text
            _at_once(client, 16)  # every pooled connection opened: all go stale below
            server.stop()
            try:
                for method, path, body in (
                        ("GET", "/api/search", None), ("GET", "/api/folders/kept", None),
                        ("POST", "/api/dashboards/db", {"dashboard": {"title": "New"}}),
                        ("GET", "/api/teams/search", None),
                        ("POST", "/login", {"user": ADMIN[0], "password": ADMIN[1]})):
                    r = client.request(method, path, json=body, auth=ADMIN)
                    assert r.status_code == 503, (path, r.status_code, r.text)
                    assert list(r.json()) == ["message"], r.text
                    assert r.json()["message"].startswith(UNAVAILABLE), r.text
                r = client.get("/api/health")
                assert (r.status_code, r.json()) == (503, FAILING)
            finally:
                # back before the app stops, whatever failed: a node stopping without its
                # PostgreSQL cannot hand its leases back, and that would hide the failure
                server.start()

            # no request pays for a connection the restart closed
            assert [client.get("/api/folders/kept", auth=ADMIN).status_code
                    for _ in range(12)] == [200] * 12
            assert client.get("/api/folders/kept", auth=ADMIN).json()["title"] == "Kept"
            r = client.post("/api/dashboards/db", json={"dashboard": {"title": "New"}},
                            auth=ADMIN)
            assert r.status_code == 200, r.text
            assert client.get("/api/health").json()["database"] == "ok"
    finally:
        server.close()


@pytest.mark.parametrize("value", [2 ** 63, -2 ** 63 - 1])
def test_an_integer_beyond_64_bits_is_refused_on_postgresql_as_sqlite_refuses_it(postgres_url,
                                                                                  value):
    """An id past 64 bits in a path or a body reaches the store as it came: both engines
    refuse it alike, so such a request is answered alike (PostgreSQL alone would compare
    it as a numeric and find nothing)."""
    from storage.shared.postgres import PostgresState

    with pytest.raises(OverflowError):
        sqlite3.connect(":memory:").execute("SELECT ?", (value,))
    state = PostgresState(postgres_url)
    try:
        with pytest.raises(OverflowError):
            state.read_sync(lambda conn: conn.execute("SELECT ?", (value,)).fetchone())
        largest = 2 ** 63 - 1 if value > 0 else -2 ** 63
        assert state.read_sync(lambda conn: conn.execute("SELECT ?", (largest,)).fetchone()) \
            == (largest,)
    finally:
        state.close()
