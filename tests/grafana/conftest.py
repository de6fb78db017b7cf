"""The fixture of spec/search.md §4.1, built once through the HTTP API and copied for every
test that changes it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
from litestar.testing import TestClient

import config as config_module
from app import create_app
from storage.db import DB_FILENAME

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


def grafana_config(data_dir: Path) -> config_module.Config:
    return config_module.config_from_dict({"common": {"path_prefix": str(data_dir)},
                                           "grafana": {"admin_password": "admin"}})


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


@pytest.fixture(scope="session")
def template(tmp_path_factory) -> tuple[Path, Fixture]:
    """A data directory holding the §4.1 fixture (the database closed and checkpointed)."""
    data_dir = tmp_path_factory.mktemp("grafana-template")
    with TestClient(create_app(grafana_config(data_dir))) as client:
        fx = build(client)
    fx.client = None  # type: ignore[assignment]
    return data_dir, fx


def _open(template: tuple[Path, Fixture], target: Path) -> Iterator[Fixture]:
    src, proto = template
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / DB_FILENAME, target / DB_FILENAME)
    with TestClient(create_app(grafana_config(target))) as client:
        yield Fixture(client, dict(proto.ids), dict(proto.tokens), dict(proto.users))


@pytest.fixture(scope="module")
def fx(template, tmp_path_factory) -> Iterator[Fixture]:
    """The fixture, shared by the read-only tests of a module."""
    yield from _open(template, tmp_path_factory.mktemp("grafana-shared"))


@pytest.fixture
def fresh(template, tmp_path) -> Iterator[Fixture]:
    """A private copy of the fixture for a test that changes it."""
    yield from _open(template, tmp_path / "data")
