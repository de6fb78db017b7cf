"""`storage.shared.url` as a user runs it: the config that starts it and the errors for bad
ones, and a PostgreSQL lost while running (/ready says so, pushes still land in ClickHouse,
what needs the shared state answers 503, all of it recovers when PostgreSQL is back).

Two nodes sharing it are in tests/shared; the Grafana API on it in tests/grafana; the read
suites keep their shared state in it in the storage matrix's clickhouse state."""

from __future__ import annotations

import time

import httpx
import pytest
import yaml

import config as config_module
from tests.conftest import LogstoreServer
from tests.helpers import (JSON_HEADERS, PUSH, now_ns, push_body, run_copy_to_clickhouse,
                           without_retention_rules)
from tests.postgres import start_server

NS = 10**9
RULES = "/logstore/api/v1/rules"


@pytest.mark.parametrize("storage, error", [
    ({"shared": {"url": "postgresql://u@h/db"}},
     "storage.shared.url needs storage.backend: clickhouse"),
    ({"backend": "clickhouse", "clickhouse": {"url": "chdb:///x"},
      "shared": {"url": "mysql://u@h/db"}},
     "storage.shared.url must be postgresql://user@host:port/database, not 'mysql://u@h/db'"),
    ({"backend": "clickhouse", "clickhouse": {"url": "chdb:///x"},
      "shared": {"url": "postgresql://u@h/db", "pasword_env": "X"}},
     "pasword_env"),
])
def test_bad_shared_settings_are_refused_naming_the_key(storage, error):
    with pytest.raises(config_module.ConfigError) as caught:
        config_module.config_from_dict({"storage": storage})
    assert error in str(caught.value)


def _config(tmp_path, url: str) -> dict:
    return {"storage": {"backend": "clickhouse",
                        "clickhouse": {"url": f"chdb://{tmp_path / 'ch'}"},
                        "shared": {"url": url}}}


def _rule_group(name: str) -> str:
    return yaml.safe_dump({"name": name, "rules": [
        {"record": "x:count", "expr": 'sum(count_over_time({app="a"}[1m]))'}]})


def test_a_lost_postgresql_is_seen_by_ready_and_pushes_still_land(tmp_path):
    pg = start_server()  # its own: this test stops it
    node = None
    try:
        url = pg.fresh_database()
        node = LogstoreServer(tmp_path / "data", _config(tmp_path, url)).start()
        assert httpx.get(node.url + "/ready").status_code == 200
        r = httpx.post(node.url + RULES + "/ns", content=_rule_group("before"),
                       headers={"Content-Type": "application/yaml"})
        assert r.status_code == 202, r.text

        pg.stop()
        r = httpx.get(node.url + "/ready")
        assert r.status_code == 503
        assert r.text.startswith(
            "Ingester not ready: the shared state (PostgreSQL) cannot be reached"), r.text
        # the log data is elsewhere: a push is still acknowledged and readable
        t = now_ns() - 5 * NS
        r = httpx.post(node.url + PUSH, content=push_body({"app": "a"}, [[str(t), "kept"]]),
                       headers=JSON_HEADERS)
        assert r.status_code == 204, r.text
        # what lives in the shared state answers 503, and stores nothing
        r = httpx.get(node.url + RULES)
        assert r.status_code == 503, r.text
        assert "the shared state (PostgreSQL) cannot be reached" in r.text
        r = httpx.post(node.url + RULES + "/ns", content=_rule_group("during"),
                       headers={"Content-Type": "application/yaml"})
        assert r.status_code == 503, r.text

        pg.start()
        assert httpx.get(node.url + "/ready").status_code == 200
        r = httpx.get(node.url + RULES + "/ns", headers={"Accept": "application/yaml"})
        assert r.status_code == 200, r.text
        assert [g["name"] for g in yaml.safe_load(r.text)["ns"]] == ["before"]
        r = httpx.get(node.url + "/logstore/api/v1/query_range", params={
            "query": '{app="a"}', "start": str(t - NS), "end": str(t + NS)})
        assert r.status_code == 200, r.text
        assert [v[1] for s in r.json()["data"]["result"] for v in s["values"]] == ["kept"]
    finally:
        if node is not None:
            node.stop()
        pg.close()


def test_a_node_without_its_shared_state_does_not_start(tmp_path):
    from tests.conftest import free_port

    node = LogstoreServer(tmp_path / "data", _config(
        tmp_path, f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"))
    with pytest.raises(RuntimeError, match="server exited") as caught:
        node.start(timeout=60)
    assert "the shared state (PostgreSQL) cannot be reached" in str(caught.value)


def _shared_answers(c, t: int) -> dict:
    """What a user sees of the shared state, through the APIs."""
    auth = ("admin", "admin")
    out = {}
    for path in ("/api/search", "/api/folders", "/api/teams/search", "/api/user/stars",
                 "/api/serviceaccounts/search", "/api/dashboards/uid/d1",
                 "/api/dashboards/uid/d1/permissions", "/api/dashboards/tags"):
        r = c.get(path, auth=auth)
        assert r.status_code == 200, (path, r.text)
        out[path] = r.json()
    r = c.get(RULES + "/ns", headers={"Accept": "application/yaml"})
    assert r.status_code == 200, r.text
    out["rules"] = yaml.safe_load(r.text)
    r = c.get("/logstore/api/v1/delete")
    assert r.status_code == 200, r.text
    out["deletes"] = r.json()
    return out


def test_copy_to_clickhouse_moves_the_shared_state_into_postgresql(tmp_path, postgres_url):
    """A single node's dashboards, folder, team, star, permission, service-account token,
    rule group and delete request, copied with the real CLI: a cluster node over the copy
    answers the same, the token still signs in, new objects get ids past the copied ones, and
    a second run changes nothing."""
    from litestar.testing import TestClient

    from app import create_app

    t = now_ns() - 600 * NS
    base = {"grafana": {"admin_password": "admin"},
            "compactor": {"retention_enabled": True}}
    sqlite_cfg = {**base, "common": {"path_prefix": str(tmp_path / "data")}}
    auth = ("admin", "admin")
    with TestClient(create_app(config_module.config_from_dict(sqlite_cfg))) as c:
        r = c.post(PUSH, content=push_body({"app": "a"}, [[str(t), "line"]]),
                   headers=JSON_HEADERS)
        assert r.status_code == 204, r.text
        assert c.post("/api/folders", json={"uid": "f1", "title": "Folder"},
                      auth=auth).status_code == 200
        for uid, title in (("d1", "First"), ("d2", "Second")):
            r = c.post("/api/dashboards/db", auth=auth, json={
                "dashboard": {"uid": uid, "title": title, "tags": ["prod", uid]},
                "folderUid": "f1"})
            assert r.status_code == 200, r.text
        assert c.post("/api/user/stars/dashboard/uid/d1", auth=auth).status_code == 200
        assert c.post("/api/teams", json={"name": "ops"}, auth=auth).status_code == 200
        r = c.post("/api/dashboards/uid/d1/permissions", auth=auth,
                   json={"items": [{"role": "Viewer", "permission": 1}]})
        assert r.status_code == 200, r.text
        r = c.post("/api/serviceaccounts", json={"name": "robot", "role": "Viewer"},
                   auth=auth)
        assert r.status_code == 201, r.text
        r = c.post(f"/api/serviceaccounts/{r.json()['id']}/tokens", json={"name": "k"},
                   auth=auth)
        key = r.json()["key"]
        r = c.post(RULES + "/ns", content=_rule_group("g1"),
                   headers={"Content-Type": "application/yaml"})
        assert r.status_code == 202, r.text
        r = c.post("/logstore/api/v1/delete", params={
            "query": '{app="a"} |= "nothing"', "start": str((t - NS) // NS),
            "end": str((t + NS) // NS)})
        assert r.status_code == 204, r.text
        want = _shared_answers(c, t)
    assert want["/api/search"] and want["rules"]["ns"] and want["deletes"]  # all there

    cluster = {**base, "storage": {"backend": "clickhouse",
                                   "clickhouse": {"url": f"chdb://{tmp_path / 'ch'}"},
                                   "shared": {"url": postgres_url}}}
    for _ in range(2):
        # the cluster's own config, over the data directory the node had
        out = run_copy_to_clickhouse({**cluster, "common": sqlite_cfg["common"]},
                                     tmp_path / "copy.yaml")
        assert "gf_dashboard: 3 rows in SQLite, 3 in PostgreSQL" in out.stdout, out.stdout
        assert "rule_groups: 1 rows in SQLite, 1 in PostgreSQL" in out.stdout, out.stdout

    data = {**cluster, "common": {"path_prefix": str(tmp_path / "node")}}
    with TestClient(create_app(config_module.config_from_dict(data))) as c:
        assert type(c.app.state.services.shared).__name__ == "PostgresState"
        assert _shared_answers(c, t) == want
        r = c.get("/api/search", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text
        r = c.post("/api/dashboards/db", auth=auth,
                   json={"dashboard": {"uid": "d3", "title": "Third"}})
        assert r.status_code == 200, r.text
        assert r.json()["id"] > max(h["id"] for h in want["/api/search"])


def test_a_node_stops_cleanly_while_postgresql_is_away(tmp_path):
    pg = start_server()  # its own: this test stops it
    try:
        node = LogstoreServer(tmp_path / "data", _config(tmp_path, pg.fresh_database()))
        node.start()
        import psycopg
        with psycopg.connect(pg.url(node.extra["storage"]["shared"]["url"].rsplit("/", 1)[1]),
                             autocommit=True) as conn:
            assert [r[0] for r in conn.execute("SELECT name FROM leases")] != []
        pg.stop()
        assert httpx.get(node.url + "/ready").status_code == 503  # the state: it is away
        node.stop()
        assert node.proc.returncode == 0, node.log_path.read_text()[-3000:]
        assert "could not release the leases" in node.log_path.read_text()
    finally:
        node.stop()
        pg.close()


def test_nodes_starting_together_migrate_clickhouse_one_after_the_other(
        tmp_path, postgres_url, monkeypatch):
    """Migration 0002 fills the rollups from the lines already stored: two nodes running it
    at once would count every line twice. While another node holds the migration lock (a
    PostgreSQL advisory lock), a starting node waits and applies nothing; then it applies
    each migration once."""
    import threading

    from litestar.testing import TestClient

    import storage.clickhouse.store as store_module
    from app import create_app
    from storage.shared.postgres import PostgresState

    data = {**_config(tmp_path, postgres_url), "common": {"path_prefix": str(tmp_path / "d")}}
    first = [m for m in store_module.migration_files() if m[0] == 1]
    t = now_ns() - 60 * NS
    with monkeypatch.context() as m:
        m.setattr(store_module, "migration_files", lambda: first)
        with TestClient(create_app(config_module.config_from_dict(data))) as c:
            client = c.app.state.services.querier.store.client
            m.setattr(client, "insert", without_retention_rules(client.insert))
            r = c.post(PUSH, content=push_body({"app": "a"}, [[str(t + i), f"l{i}"]
                                                              for i in range(5)]),
                       headers=JSON_HEADERS)
            assert r.status_code == 204, r.text
    cfg = config_module.config_from_dict(data)
    other, starting = PostgresState(postgres_url), PostgresState(postgres_url)
    from services.runtime.wiring import clickhouse_logs
    store = clickhouse_logs(cfg.storage, starting)
    applied: list[str] = []
    try:
        with other.exclusive("logstore clickhouse migrations"):
            opener = threading.Thread(target=lambda: applied.extend(store.open()))
            opener.start()
            deadline = time.monotonic() + 30
            while not other.read_sync(lambda conn: conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND NOT granted").fetchone()[0]):
                assert time.monotonic() < deadline, "the starting node never waited"
                time.sleep(0.02)  # polling for the state: the node waits for the lock
            assert store.client.query(
                f"SELECT version FROM {store.db}.schema_version") == [[1]]
        opener.join(60)
        assert applied == ["0002_rollups.sql", "0003_retention_rules.sql"]
        assert store.client.query(f"SELECT sum(lines) FROM {store.db}.rollups") == [[5]]
    finally:
        store.close()
        other.close()
        starting.close()
