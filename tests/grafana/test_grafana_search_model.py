"""Search over HTTP against a plain-Python model of spec/search.md §1.3 and §2.4 on random
data: random nested folders, mixed-case and duplicate titles, tags, replaced permissions for
users, teams and roles, stars; random parameter combinations from hypothesis."""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from app import create_app
from services.grafana import identity as ident_svc
from services.grafana import objects
from services.grafana.common import Caller
from services.grafana.perms import PermissionItem, replace_entries
from storage.grafana import objects as store

WORDS = ["alpha", "Alpha", "beta", "Beta", "gamma", "ZETA", "_x", "Ünï", "pay", "Pay"]
TAGS = ["a", "b", "c", "B", "prod", "x y"]
USERS = {"admin": ("admin", "Admin"), "ed": ("ed-pass", "Editor"), "vi": ("vi-pass", "Viewer"),
         "vt": ("vt-pass", "Viewer"), "no": ("no-pass", "None")}


def build(state: Any, seed: int = 11) -> dict:
    """The random world, written through the services' own functions into `state` (an
    opened store of storage/shared)."""
    rng = random.Random(seed)
    admin = Caller(user_id=1, login="admin", org_id=1, role="Admin", is_server_admin=True)
    from services.grafana.auth import bootstrap, hash_password

    def fill(conn: Any) -> dict:
        bootstrap(conn, "admin", "admin")
        ids = {"admin": 1}
        for login, (password, role) in USERS.items():
            if login == "admin":
                continue
            ids[login] = ident_svc.create_user(conn, admin, ident_svc.CreateUser(
                login=login, password=password), hash_password(password))["id"]
            if role != "Viewer":
                ident_svc.patch_org_user(conn, admin, ids[login], ident_svc.RolePatch(role=role))
        team = ident_svc.create_team(conn, admin, ident_svc.CreateTeam(name="t"))["teamId"]
        ident_svc.add_team_member(conn, admin, team, ident_svc.TeamMember(userId=ids["vt"]))
        folders: list[tuple[str, int]] = []  # (uid, depth)
        for i in range(24):
            parents = [f for f in folders if f[1] < 3]
            parent = rng.choice(parents) if parents and rng.random() < 0.6 else None
            uid = f"f{i}"
            objects.create_folder(conn, admin, objects.CreateFolder(
                uid=uid, title=f"{rng.choice(WORDS)} {i}", parentUid=parent[0] if parent else None))
            folders.append((uid, parent[1] + 1 if parent else 1))
        for i in range(70):
            folder = rng.choice(folders)[0] if rng.random() < 0.75 else ""
            title = rng.choice(WORDS) + ("" if rng.random() < 0.3 else f" {rng.choice(WORDS)}")
            objects.save_dashboard(conn, admin, objects.SaveDashboard(
                dashboard={"uid": f"d{i}", "title": title,
                           "tags": rng.sample(TAGS, rng.randint(0, 3))}, folderUid=folder))
        all_uids = [f"f{i}" for i in range(24)] + [f"d{i}" for i in range(70)]
        for uid in rng.sample(all_uids, 30):
            items = []
            for _ in range(rng.randint(0, 2)):
                level = rng.choice([1, 2, 4])
                kind = rng.choice(["user", "team", "role"])
                if kind == "user":
                    items.append(PermissionItem(userId=ids[rng.choice(["ed", "vi", "vt", "no"])],
                                                permission=level))
                elif kind == "team":
                    items.append(PermissionItem(teamId=team, permission=level))
                else:
                    items.append(PermissionItem(role=rng.choice(["Viewer", "Editor"]),
                                                permission=level))
            replace_entries(conn, admin, store.by_uid(conn, 1, uid), items)
        for login in ("admin", "ed", "vi", "vt"):
            for uid in rng.sample(all_uids[24:], 8):
                store.star(conn, ids[login], store.by_uid(conn, 1, uid)["id"])
        return {"ids": ids, "team": team}

    return state.write_sync(fill)


def ascii_lower(text: str) -> str:
    """SQLite's LIKE folds case for ASCII letters only."""
    return text.translate(str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ",
                                        "abcdefghijklmnopqrstuvwxyz"))


class Model:
    """Everything read back from the database; search answered the way the spec describes."""

    def __init__(self, conn: Any, ids: dict, team: int):
        self.rows = [dict(zip(("id", "uid", "title", "is_folder", "parent_id"), r))
                     for r in conn.execute("SELECT id, uid, title, is_folder, parent_id "
                                           "FROM gf_dashboard")]
        self.by_id = {r["id"]: r for r in self.rows}
        self.tags: dict[int, list[str]] = {}
        for dash_id, term in conn.execute("SELECT dashboard_id, term FROM gf_dashboard_tag"):
            self.tags.setdefault(dash_id, []).append(term)
        self.entries = list(conn.execute(
            "SELECT object_id, user_id, team_id, role, level FROM gf_permission"))
        self.stars = {}
        for user_id, dash_id in conn.execute("SELECT user_id, dashboard_id FROM gf_star"):
            self.stars.setdefault(user_id, set()).add(dash_id)
        self.roles = {u: r for u, r in conn.execute("SELECT user_id, role FROM gf_org_user")}
        self.teams = {ids["vt"]: {team}}

    def level(self, user_id: int, row: dict) -> int:
        role = self.roles[user_id]
        if role == "Admin":
            return 4
        best, node = 0, row
        while node is not None:
            for obj, uid_, team, erole, level in self.entries:
                if obj != node["id"]:
                    continue
                if (uid_ == user_id or (team and team in self.teams.get(user_id, ()))
                        or (erole is not None and erole == role)):
                    best = max(best, level)
            node = self.by_id.get(node["parent_id"]) if node["parent_id"] else None
        return best

    def search(self, user_id: int, p: dict) -> list[tuple]:
        stars = self.stars.get(user_id, set())
        if p.get("starred") and not stars:
            return []
        need = 2 if p.get("permission") == "Edit" else 1
        uids = p.get("dashboardUIDs") or []
        ids = p.get("dashboardIds") or []
        star_filter = bool(p.get("starred")) and not uids and not ids
        parents = None
        if p.get("folderIds") and not p.get("folderUIDs"):
            parents = {None if f == 0 else f for f in p["folderIds"]}
        if p.get("folderUIDs"):
            parents = {None if u == "general" else next(
                (r["id"] for r in self.rows if r["uid"] == u and r["is_folder"]), -1)
                for u in p["folderUIDs"]}
        kind = {"dash-folder": 1, "dash-db": 0}.get(p.get("type", ""))
        query = ascii_lower(p.get("query") or "")
        out = []
        for r in self.rows:
            if self.level(user_id, r) < need:
                continue
            if kind is not None and r["is_folder"] != kind:
                continue
            if query and query not in ascii_lower(r["title"]):
                continue
            if p.get("tag"):
                have = self.tags.get(r["id"], [])
                if sum(1 for t in have if t in p["tag"]) < len(p["tag"]):
                    continue
            if uids and r["uid"] not in uids:
                continue
            if ids and r["id"] not in ids:
                continue
            if star_filter and r["id"] not in stars:
                continue
            if parents is not None and r["parent_id"] not in parents:
                continue
            out.append(r)
        sort = p.get("sort", "")
        out.sort(key=lambda r: (r["title"], r["id"]), reverse=sort == "alpha-desc")
        limit, page = p.get("limit", 1000), p.get("page", 1)
        window = out[(page - 1) * limit: page * limit]
        if not sort:
            window.sort(key=lambda r: (not r["is_folder"], r["title"].lower(), r["id"]))
        hits = [(r["id"], sorted(self.tags.get(r["id"], [])), r["id"] in stars) for r in window]
        if p.get("starred"):
            hits = [h for h in hits if h[2]]
        return hits


@pytest.fixture(scope="module")
def world(grafana_store, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("grafana-model")
    cfg = grafana_store.config(data_dir)
    with TestClient(create_app(cfg)) as client:
        # built beside the running app in its own store, then read back once for the model
        state = client.app.state.services.shared
        built = build(state)
        model = state.read_sync(Model, built["ids"], built["team"])
        yield client, model, built["ids"]


params = st.fixed_dictionaries({}, optional={
    "query": st.sampled_from(["a", "A", "pay", "ZETA", "ü", "Ünï", " ", "zz"]),
    "tag": st.lists(st.sampled_from(TAGS), min_size=1, max_size=3),
    "type": st.sampled_from(["dash-folder", "dash-db", "bogus"]),
    "dashboardUIDs": st.lists(st.sampled_from([f"d{i}" for i in range(0, 70, 3)] +
                                              ["f1", "f2", "nope"]), min_size=1, max_size=5),
    "folderUIDs": st.lists(st.sampled_from(["general", "f0", "f1", "f3", "f5", "f8", "d1"]),
                           min_size=1, max_size=3),
    "dashboardIds": st.lists(st.integers(0, 100), min_size=1, max_size=5),
    "folderIds": st.lists(st.integers(0, 30), min_size=1, max_size=3),
    "starred": st.just(True),
    "limit": st.integers(1, 12),
    "page": st.integers(1, 6),
    "sort": st.sampled_from(["alpha-asc", "alpha-desc", "foo"]),
    "permission": st.just("Edit"),
})


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(who=st.sampled_from(list(USERS)), p=params)
def test_search_matches_the_model(world, who, p):
    client, model, ids = world
    pairs = []
    for key, value in p.items():
        for v in (value if isinstance(value, list) else [value]):
            pairs.append((key, "true" if v is True else str(v)))
    r = client.get("/api/search?" + urlencode(pairs), auth=(who, USERS[who][0]))
    if (p.get("dashboardIds") and p.get("dashboardUIDs")) or (p.get("folderIds")
                                                                and p.get("folderUIDs")):
        assert (r.status_code, r.json()) == (400, {
            "message": "search supports UIDs or IDs, not both"})
        return
    assert r.status_code == 200, r.text
    got = [(h["id"], sorted(h["tags"]), h["isStarred"]) for h in r.json()]
    assert got == model.search(ids[who], p)
    for h in r.json():
        row = model.by_id[h["id"]]
        assert h["type"] == ("dash-folder" if row["is_folder"] else "dash-db")
        assert ("folderUid" in h) == (row["parent_id"] is not None)
        if not p.get("sort"):
            assert h["tags"] == sorted(h["tags"])
