"""The fixture of spec/search.md §4.1, built once through the HTTP API and copied for every
test that changes it.

Grafana's objects live in one of two stores: "sqlite", the data directory's file of one node,
or "postgres", the shared state of a cluster (`storage.shared.url` on a real PostgreSQL, with
`storage.backend: clickhouse` on the embedded engine), where the SQL of storage/grafana runs
through the dialect translation of storage/shared/postgres.py. Every test on the fixture
(`fx`, `fresh`, `template`) or asking for `grafana_store` runs on SQLite, and the tests
ON_POSTGRES names run on PostgreSQL too, with the same assertions. The fixture is copied as a
file on SQLite and as a database made from a template database on PostgreSQL.

The PostgreSQL subset halves what PostgreSQL adds to the suite's time (measured with -n 2
on two cores: SQLite alone 40 s, with the subset 58 s, with all of tests/grafana on both
78 s) while still calling every function of storage/grafana: all of the search scenarios
and the random search model (LIKE, case, Unicode, order, permissions, paging), all of
test_grafana_api (users, teams, service accounts, tokens, dashboards, folders, permissions,
stars), the session tests that store, find, refresh and end sessions, and
test_shared_postgres (concurrent creates on two nodes, an outage). Left on SQLite only are
the tests of what no store decides: the login limiter (in memory), password hashing
rounds, cookie and CSRF rules, and grafana-client over a real server.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
from litestar.testing import TestClient

import config as config_module
from app import create_app
from storage.db import DB_FILENAME
from tests.storage_matrix import clickhouse_config

STORES = ("sqlite", "postgres")
# module -> the tests of it that run on PostgreSQL too (None: all of them); see above
ON_POSTGRES: dict[str, frozenset[str] | None] = {
    "test_grafana_scenarios.py": None,
    "test_grafana_search_model.py": None,
    "test_grafana_api.py": None,
    "test_shared_postgres.py": None,
    "test_session_login.py": frozenset({
        "test_logout_ends_the_session_for_a_replayed_cookie",
        "test_a_session_survives_a_restart_and_ends_with_a_new_password",
        "test_a_session_unused_for_seven_days_ends"}),
}


def pytest_generate_tests(metafunc) -> None:
    if "grafana_store" not in metafunc.fixturenames:
        return
    tests = ON_POSTGRES.get(Path(metafunc.module.__file__).name, frozenset())
    both = tests is None or metafunc.function.__name__ in tests
    metafunc.parametrize("grafana_store", STORES if both else STORES[:1], indirect=True,
                         scope="session")

ADMIN = ("admin", "admin")
ALICE = ("alice", "alice-pass")
BOB = ("bob", "bob-pass")

FOLDERS = [("infra", "Infrastructure", None), ("db-nested", "Databases", "infra"),
           ("payments", "Team Payments", None)]
DASHBOARDS = [
    ("prod-overview", "Production Overview", "", ["prod", "overview"]),
    ("cpu-usage", "cpu usage", "", ["infra", "perf"]),
    ("node-exporter", "Node Exporter", "infra", ["infra", "linux"]),
    ("network-traffic", "Network Traffic", "infra", ["prod", "infra", "network"]),
    ("postgres-stats", "Postgres Stats", "db-nested", ["db", "prod"]),
    ("redis-cache", "Redis Cache", "db-nested", ["db"]),
    ("payments-api", "Payments API", "payments", ["prod", "payments"]),
    ("payments-errors", "Payments Errors", "payments", ["payments"]),
]


def grafana_config(data_dir: Path, shared_url: str | None = None,
                   grafana: dict | None = None, own_process: bool = False) -> dict[str, Any]:
    """The settings of an app whose Grafana objects are in `data_dir`'s SQLite file, or with
    `shared_url` in that PostgreSQL database (and the log data in ClickHouse, as
    storage.shared.url requires)."""
    out: dict[str, Any] = {"common": {"path_prefix": str(data_dir)},
                           "grafana": {"admin_password": "admin", **(grafana or {})}}
    if shared_url:
        out["storage"] = {**clickhouse_config(data_dir, own_process),
                          "shared": {"url": shared_url}}
    return out


@dataclass
class Store:
    """Where the apps of a test keep Grafana's objects."""
    name: str
    server: Any = None  # tests.postgres.Server on "postgres"

    def database(self, data_dir: Path, template: str | None = None) -> str | None:
        """The URL of the PostgreSQL database of the app at `data_dir` (None on SQLite): made
        at the first call, empty or as a copy of `template`, and found again by later calls
        with the same `data_dir`, so an app opened again there is the app restarted."""
        if self.server is None:
            return None
        import psycopg

        name = "g" + hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:20]
        with psycopg.connect(self.server.url(), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                (name,)).fetchone():
                conn.execute(f"CREATE DATABASE {name}"
                             + (f" TEMPLATE {template}" if template else ""))
        return self.server.url(name)

    def config(self, data_dir: Path, grafana: dict | None = None,
               template: str | None = None) -> config_module.Config:
        return config_module.config_from_dict(
            grafana_config(data_dir, self.database(data_dir, template), grafana))


@pytest.fixture(scope="session")
def grafana_store(request) -> Store:
    if request.param == "sqlite":
        return Store("sqlite")
    return Store("postgres", request.getfixturevalue("postgres_server"))


@dataclass
class Fixture:
    client: TestClient
    ids: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)

    def auth(self, who: str) -> dict[str, Any]:
        """Request keyword arguments authenticating as A, L, B, SV or SN."""
        if who in ("SV", "SN"):
            return {"headers": {"Authorization": f"Bearer {self.tokens[who]}"}}
        return {"auth": {"A": ADMIN, "L": ALICE, "B": BOB}[who]}

    @property
    def state(self) -> Any:
        """The app's own store of Grafana's objects (storage/shared: `read_sync`,
        `write_sync`), for what a test reads or plants behind the API."""
        return self.client.app.state.services.shared

    def get(self, path: str, who: str = "A", **kw: Any):
        return self.client.get(path, **self.auth(who), **kw)

    def post(self, path: str, body: Any = None, who: str = "A"):
        return self.client.post(path, json=body, **self.auth(who))

    def put(self, path: str, body: Any = None, who: str = "A"):
        return self.client.put(path, json=body, **self.auth(who))

    def delete(self, path: str, who: str = "A"):
        return self.client.delete(path, **self.auth(who))

    def search(self, qs: str = "", who: str = "A"):
        return self.get("/api/search" + ("?" + qs if qs else ""), who)

    def titles(self, qs: str = "", who: str = "A") -> list[str]:
        r = self.search(qs, who)
        assert r.status_code == 200, r.text
        return [h["title"] for h in r.json()]


def _ok(r) -> dict:
    assert r.status_code in (200, 201), (r.status_code, r.text)
    return r.json()


def build(client: TestClient) -> Fixture:
    fx = Fixture(client)
    for login, password, name in (("alice", "alice-pass", "Alice"), ("bob", "bob-pass", "Bob")):
        out = _ok(fx.post("/api/admin/users", {"name": name, "email": f"{login}@example.com",
                                               "login": login, "password": password}))
        fx.users[login] = out["id"]
    _ok(fx.client.patch(f"/api/org/users/{fx.users['bob']}", json={"role": "Editor"},
                        auth=ADMIN))
    for name, role, key in (("viewer-bot", "Viewer", "SV"), ("nobody-bot", "None", "SN")):
        sa = _ok(fx.post("/api/serviceaccounts/", {"name": name, "role": role}))
        fx.users[name] = sa["id"]
        fx.tokens[key] = _ok(fx.post(f"/api/serviceaccounts/{sa['id']}/tokens",
                                     {"name": f"{name}-token"}))["key"]
    for uid, title, parent in FOLDERS:
        body = {"uid": uid, "title": title}
        if parent:
            body["parentUid"] = parent
        fx.ids[uid] = _ok(fx.post("/api/folders", body))["id"]
    for uid, title, folder, tags in DASHBOARDS:
        fx.ids[uid] = _ok(fx.post("/api/dashboards/db", {
            "dashboard": {"uid": uid, "title": title, "tags": tags}, "folderUid": folder}))["id"]
    _ok(fx.post("/api/folders/payments/permissions",
                {"items": [{"userId": fx.users["bob"], "permission": 2}]}))
    _ok(fx.post("/api/dashboards/uid/cpu-usage/permissions",
                {"items": [{"role": "Editor", "permission": 2}]}))
    _ok(fx.post("/api/dashboards/uid/payments-errors/permissions",
                {"items": [{"userId": fx.users["alice"], "permission": 1}]}))
    _ok(fx.post("/api/user/stars/dashboard/uid/prod-overview", who="L"))
    return fx


@dataclass
class Template:
    """The fixture's data, closed: a data directory's file, or a PostgreSQL database no
    connection holds (CREATE DATABASE ... TEMPLATE copies only such a one)."""
    store: Store
    data_dir: Path
    fixture: Fixture
    database: str | None

    def config(self, target: Path, grafana: dict | None = None) -> config_module.Config:
        """The settings of an app over a copy of the fixture at `target` (copied the first
        time; an app opened again on `target` finds what the last one left)."""
        if self.database is None and not (target / DB_FILENAME).exists():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.data_dir / DB_FILENAME, target / DB_FILENAME)
        return self.store.config(target, grafana, self.database)


@pytest.fixture(scope="session")
def template(grafana_store: Store, tmp_path_factory) -> Template:
    data_dir = tmp_path_factory.mktemp("grafana-template")
    cfg = grafana_store.config(data_dir)
    with TestClient(create_app(cfg)) as client:
        fx = build(client)
    fx.client = None  # type: ignore[assignment]
    url = cfg.storage.shared.url
    return Template(grafana_store, data_dir, fx, url.rsplit("/", 1)[1] if url else None)


def _open(template: Template, target: Path) -> Iterator[Fixture]:
    proto = template.fixture
    with TestClient(create_app(template.config(target))) as client:
        yield Fixture(client, dict(proto.ids), dict(proto.tokens), dict(proto.users))


@pytest.fixture(scope="module")
def fx(template, tmp_path_factory) -> Iterator[Fixture]:
    """The fixture, shared by the read-only tests of a module."""
    yield from _open(template, tmp_path_factory.mktemp("grafana-shared"))


@pytest.fixture
def fresh(template, tmp_path) -> Iterator[Fixture]:
    """A private copy of the fixture for a test that changes it."""
    yield from _open(template, tmp_path / "data")
