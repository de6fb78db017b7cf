"""The companion API around search (spec/search.md §2-§3): auth, first start, dashboards,
folders, permissions, stars, teams, service accounts. Through HTTP, asserting what a client
sees."""

from __future__ import annotations

import base64
import sqlite3
import zlib

from litestar.testing import TestClient

import config as config_module
from app import create_app
from storage.db import DB_FILENAME
from tests.grafana.conftest import Store


def app_client(store: Store, data_dir) -> TestClient:
    """An app on `store` with no admin password configured."""
    return TestClient(create_app(store.config(data_dir, {"admin_password": ""})))


# -- first start, probes, authentication ------------------------------------------------------
def test_first_start_generates_and_prints_a_password_once(grafana_store, tmp_path, capsys):
    with app_client(grafana_store, tmp_path) as c:
        err = capsys.readouterr().err
        assert "user 'admin' and password '" in err
        password = err.split("password '", 1)[1].split("'", 1)[0]
        assert len(password) >= 16
        assert c.get("/api/user", auth=("admin", password)).json()["login"] == "admin"
        assert c.get("/api/user", auth=("admin", "admin")).status_code == 401
    with app_client(grafana_store, tmp_path) as c:  # second start: nothing printed, same password
        assert "password" not in capsys.readouterr().err
        assert c.get("/api/user", auth=("admin", password)).status_code == 200


def test_configured_admin_from_environment(tmp_path):
    cfg = config_module.load_config(env={"LOGSTORE_DATA_DIR": str(tmp_path),
                                         "LOGSTORE_GRAFANA_ADMIN_PASSWORD": "s3cret-pw"})
    with TestClient(create_app(cfg)) as c:
        r = c.get("/api/user", auth=("admin", "s3cret-pw"))
        assert r.status_code == 200
        assert r.json()["isGrafanaAdmin"] is True and r.json()["orgId"] == 1
    db = sqlite3.connect(tmp_path / DB_FILENAME)
    (stored,) = db.execute("SELECT password_hash FROM gf_user WHERE login = 'admin'").fetchone()
    assert "s3cret-pw" not in stored and stored.startswith("pbkdf2_sha256$")


def test_probes_need_no_credentials(fx):
    client = fx.client
    r = client.get("/api/health")
    assert (r.status_code, r.json()) == (200, {"commit": "logstore", "database": "ok",
                                               "version": "11.3.0"})
    assert list(r.json()) == ["commit", "database", "version"]
    r = client.get("/api/frontend/settings")
    assert r.status_code == 200 and r.json()["buildInfo"]["version"] == "11.3.0"


def test_every_other_endpoint_needs_credentials(fx):
    client = fx.client
    for method, path in (("GET", "/api/dashboards/tags"), ("GET", "/api/folders"),
                         ("POST", "/api/dashboards/db"), ("GET", "/api/user"),
                         ("POST", "/api/serviceaccounts/"), ("GET", "/api/search/sorting")):
        r = client.request(method, path, json={})
        assert (r.status_code, r.json()) == (401, {"message": "Unauthorized"}), path


def test_malformed_authorization_headers(fx):
    for header in ("Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode(),
                   "Bearer eyJrIjoiYSJ9", "Digest abc", "Bearer glsa_short_00000000"):
        assert fx.client.get("/api/search", headers={"Authorization": header}).status_code \
            == 401, header


def test_login_by_email_and_org_header(fx):
    assert fx.client.get("/api/search", auth=("alice@example.com", "alice-pass")).status_code \
        == 200
    assert fx.client.get("/api/search", auth=("alice", "alice-pass"),
                         headers={"X-Grafana-Org-Id": "1"}).status_code == 200
    assert fx.client.get("/api/search", auth=("alice", "alice-pass"),
                         headers={"X-Grafana-Org-Id": "2"}).status_code == 401
    assert fx.client.get("/api/search", headers={"Authorization": f"Bearer {fx.tokens['SV']}",
                                                 "X-Grafana-Org-Id": "2"}).status_code == 401


def test_token_shape_checksum_and_hash_only_storage(fx):
    key = fx.tokens["SV"]
    prefix, secret, checksum = key.rsplit("_", 2)[0], key.split("_")[1], key.rsplit("_", 1)[1]
    assert prefix == "glsa" and len(secret) == 32 and secret.isalnum()
    assert checksum == zlib.crc32(f"glsa_{secret}".encode()).to_bytes(4, "little").hex()
    tokens = fx.get(f"/api/serviceaccounts/{fx.users['viewer-bot']}/tokens").json()
    assert [t["name"] for t in tokens] == ["viewer-bot-token"]
    assert "key" not in tokens[0] and tokens[0]["hasExpired"] is False
    # the same secret with a wrong checksum, and a right checksum on an unknown secret
    forged = f"glsa_{secret[::-1]}_" + zlib.crc32(f"glsa_{secret[::-1]}".encode()) \
        .to_bytes(4, "little").hex()
    assert fx.client.get("/api/search", headers={"Authorization": "Bearer " + forged}) \
        .status_code == 401


def test_disabled_or_deleted_service_account_loses_access(fresh):
    sa = fresh.users["viewer-bot"]
    assert fresh.search("", "SV").status_code == 200
    r = fresh.client.patch(f"/api/serviceaccounts/{sa}", json={"isDisabled": True},
                           auth=("admin", "admin"))
    assert r.status_code == 200 and r.json()["serviceaccount"]["isDisabled"] is True
    assert fresh.search("", "SV").status_code == 401
    assert fresh.delete(f"/api/serviceaccounts/{sa}").json() == {
        "message": "Service account deleted"}
    assert fresh.search("", "SV").status_code == 401


def test_service_account_api(fresh):
    r = fresh.post("/api/serviceaccounts", {"name": "ops bot", "role": "Editor"})
    assert r.status_code == 201
    body = r.json()
    assert {k: body[k] for k in ("name", "login", "orgId", "isDisabled", "role")} == {
        "name": "ops bot", "login": "sa-ops-bot", "orgId": 1, "isDisabled": False,
        "role": "Editor"}
    assert fresh.post("/api/serviceaccounts", {"name": "ops bot"}).status_code == 409
    assert fresh.post("/api/serviceaccounts", {"name": "x", "role": "Boss"}).status_code == 400
    assert fresh.get(f"/api/serviceaccounts/{body['id']}?accesscontrol=true").json()["id"] \
        == body["id"]
    page = fresh.get("/api/serviceaccounts/search?perpage=2&page=1").json()
    assert page["totalCount"] == 3 and len(page["serviceAccounts"]) == 2
    assert fresh.get("/api/serviceaccounts/search?perpage=2&page=3").json()[
        "serviceAccounts"] == []
    token = fresh.post(f"/api/serviceaccounts/{body['id']}/tokens", {"name": "t"})
    assert token.status_code == 200 and list(token.json()) == ["id", "name", "key"]
    assert fresh.post(f"/api/serviceaccounts/{body['id']}/tokens", {"name": "t"}) \
        .status_code == 409
    assert fresh.get("/api/serviceaccounts/999").status_code == 404
    # only org admins manage service accounts
    assert fresh.post("/api/serviceaccounts", {"name": "y"}, who="B").status_code == 403
    assert fresh.get("/api/serviceaccounts/search", who="SV").status_code == 403


def test_a_deleted_token_no_longer_signs_in(fresh):
    sa = fresh.users["viewer-bot"]
    (token,) = fresh.get(f"/api/serviceaccounts/{sa}/tokens").json()
    r = fresh.delete(f"/api/serviceaccounts/{sa}/tokens/{token['id']}")
    assert (r.status_code, r.json()) == (200, {"message": "Service account token deleted"})
    assert fresh.search("", "SV").status_code == 401
    assert fresh.get(f"/api/serviceaccounts/{sa}/tokens").json() == []
    r = fresh.delete(f"/api/serviceaccounts/{sa}/tokens/{token['id']}")
    assert (r.status_code, r.json()) == (404, {"message": "service account token not found"})


def test_adding_a_user_to_the_org_they_are_in(fresh):
    r = fresh.post("/api/org/users", {"loginOrEmail": "alice@example.com", "role": "Editor"})
    assert (r.status_code, r.json()) == (409, {
        "message": "User is already member of this organization"})
    r = fresh.post("/api/org/users", {"loginOrEmail": "nobody", "role": "Editor"})
    assert (r.status_code, r.json()) == (404, {"message": "User not found"})
    assert {u["login"]: u["role"] for u in fresh.get("/api/org/users").json()}["alice"] \
        == "Viewer"


def test_users_teams_and_roles(fresh):
    assert fresh.post("/api/admin/users", {"login": "carol", "password": "carol-pw"},
                      who="B").status_code == 403
    r = fresh.post("/api/admin/users", {"login": "alice", "password": "xxxx"})
    assert r.status_code == 412
    carol = fresh.post("/api/admin/users", {"login": "carol", "email": "carol@example.com",
                                            "password": "carol-pw"}).json()["id"]
    users = {u["login"]: u["role"] for u in fresh.get("/api/org/users").json()}
    assert users == {"admin": "Admin", "alice": "Viewer", "bob": "Editor", "carol": "Viewer"}
    team = fresh.post("/api/teams", {"name": "payments-team"}).json()
    assert team["message"] == "Team created"
    assert fresh.post("/api/teams", {"name": "payments-team"}).status_code == 409
    # a team grant on Team Payments makes it visible to carol once she joins
    assert fresh.post("/api/folders/payments/permissions", {"items": [
        {"userId": fresh.users["bob"], "permission": 2},
        {"teamId": team["teamId"], "permission": 1}]}).status_code == 200
    carol_titles = lambda: [h["title"] for h in fresh.client.get(  # noqa: E731
        "/api/search?folderUIDs=payments", auth=("carol", "carol-pw")).json()]
    assert carol_titles() == []
    assert fresh.post(f"/api/teams/{team['teamId']}/members", {"userId": carol}).json() == {
        "message": "Member added to Team"}
    assert carol_titles() == ["Payments API", "Payments Errors"]
    found = fresh.get("/api/teams/search?query=pay").json()
    assert (found["totalCount"], found["teams"][0]["memberCount"]) == (1, 1)
    assert fresh.delete(f"/api/teams/{team['teamId']}/members/{carol}").status_code == 200
    assert carol_titles() == []
    # a password change by the server admin takes effect at once
    assert fresh.put(f"/api/admin/users/{carol}/password", {"password": "new-pw"}) \
        .status_code == 200
    assert fresh.client.get("/api/search", auth=("carol", "carol-pw")).status_code == 401
    r = fresh.client.put("/api/user/password", json={"oldPassword": "new-pw",
                                                      "newPassword": "newer-pw",
                                                      "confirmNew": "newer-pw"},
                         auth=("carol", "new-pw"))
    assert r.status_code == 200
    assert fresh.client.get("/api/search", auth=("carol", "newer-pw")).status_code == 200


# -- dashboards -------------------------------------------------------------------------------
def test_dashboard_save_errors_change_nothing(fresh):
    before = fresh.search().json()
    cases = [
        ({"dashboard": {"title": ""}}, 400, {"message": "Dashboard title cannot be empty",
                                             "status": "empty-name"}),
        ({"dashboard": {"title": "x" * 5001}}, 400, {
            "message": "Dashboard title cannot contain more than 5 000 characters",
            "status": "title-too-long"}),
        ({"dashboard": {"title": "t", "uid": "a b"}}, 400,
         {"message": "uid contains illegal characters"}),
        ({"dashboard": {"title": "t", "uid": "a" * 41}}, 400,
         {"message": "uid too long, max 40 characters"}),
        ({"dashboard": {"title": "t"}, "isFolder": True}, 400,
         {"message": "Use folders endpoint for saving folders."}),
        ({"dashboard": {"title": "t"}, "folderUid": "nope"}, 400,
         {"message": "folder not found"}),
        ({"dashboard": {"title": "t", "uid": "infra"}}, 400,
         {"message": "Dashboard cannot be changed to a folder"}),
        ({"dashboard": {"title": "t", "id": 9999}}, 404,
         {"message": "Dashboard not found", "status": "not-found"}),
        ({"dashboard": {"title": "t", "id": 4, "uid": "cpu-usage"}}, 400,
         {"message": "A dashboard with the same uid already exists"}),
        ({"dashboard": "not an object"}, 400, {"message": "bad request data"}),
    ]
    for body, status, answer in cases:
        r = fresh.post("/api/dashboards/db", body)
        assert (r.status_code, r.json()) == (status, answer), body
    r = fresh.client.post("/api/dashboards/db", content=b"{not json", auth=("admin", "admin"))
    assert (r.status_code, r.json()) == (400, {"message": "bad request data"})
    assert fresh.search().json() == before


def test_dashboard_roles_and_moves(fresh):
    # a Viewer cannot save; an Editor can create at the root but not in a folder without Edit
    body = {"dashboard": {"title": "Bob's"}}
    r = fresh.post("/api/dashboards/db", body, who="L")
    assert (r.status_code, r.json()) == (403, {"message": "Access denied to save dashboard"})
    r = fresh.post("/api/dashboards/db", body, who="B")
    assert r.status_code == 200 and r.json()["folderUid"] == ""
    assert sorted(r.json()) == ["folderUid", "id", "slug", "status", "uid", "url", "version"]
    uid = r.json()["uid"]
    # root defaults: the Viewer sees it at once
    assert fresh.titles("query=Bob", "L") == ["Bob's"]
    # update into a folder, then omit the folder: it moves back to the root
    r = fresh.post("/api/dashboards/db", {"dashboard": {"uid": uid, "title": "Bob's",
                                                        "version": 1}, "folderUid": "infra"},
                   who="B")
    assert (r.status_code, r.json()["folderUid"], r.json()["version"]) == (200, "infra", 2)
    r = fresh.post("/api/dashboards/db", {"dashboard": {"uid": uid, "title": "Bob's"},
                                          "overwrite": True}, who="B")
    assert (r.status_code, r.json()["folderUid"], r.json()["version"]) == (200, "", 3)
    assert "folderUid" not in fresh.search(f"dashboardUIDs={uid}").json()[0]
    # the model round-trips with server-owned id, uid and version
    got = fresh.get(f"/api/dashboards/uid/{uid}", "B").json()
    assert got["dashboard"] == {"title": "Bob's", "uid": uid, "id": got["dashboard"]["id"],
                                "version": 3}
    assert got["meta"]["createdBy"] == "bob" and got["meta"]["folderUid"] == ""


def test_dashboard_read_and_delete(fresh):
    r = fresh.get("/api/dashboards/uid/nope")
    assert (r.status_code, r.json()) == (404, {"message": "Dashboard not found"})
    r = fresh.get("/api/dashboards/uid/node-exporter", "L")
    meta = r.json()["meta"]
    assert (meta["canSave"], meta["canAdmin"], meta["canStar"]) == (False, False, True)
    assert meta["folderUrl"] == "/dashboards/f/infra/infrastructure"
    assert "isStarred" not in meta
    assert fresh.get("/api/dashboards/uid/prod-overview", "L").json()["meta"]["isStarred"]
    assert fresh.delete("/api/dashboards/uid/node-exporter", "L").status_code == 403
    r = fresh.delete("/api/dashboards/uid/infra")
    assert (r.status_code, r.json()) == (400, {
        "message": "Use folders endpoint for deleting folders."})
    assert fresh.delete("/api/dashboards/uid/nope").status_code == 404


# -- folders ----------------------------------------------------------------------------------
def test_folder_api(fresh):
    assert fresh.post("/api/folders", {"uid": "x"}).json() == {
        "message": "folder title cannot be empty"}
    r = fresh.post("/api/folders", {"uid": "infra", "title": "Other"})
    assert (r.status_code, r.json()) == (409, {
        "message": "a folder/dashboard with the same uid already exists"})
    assert fresh.post("/api/folders", {"uid": "general", "title": "G"}).status_code == 400
    assert fresh.post("/api/folders", {"title": "Infrastructure"}).status_code == 409
    assert fresh.post("/api/folders", {"title": "In nowhere", "parentUid": "nope"}) \
        .status_code == 404
    assert fresh.post("/api/folders", {"title": "Mine"}, who="L").status_code == 403
    assert fresh.post("/api/folders", {"title": "Sub", "parentUid": "infra"}, who="B") \
        .status_code == 200  # bob has Edit on infra through the root Editor default
    r = fresh.get("/api/folders/nope")
    assert (r.status_code, r.json()) == (404, {"message": "folder not found",
                                               "status": "not-found"})
    assert fresh.get("/api/folders/payments", "L").status_code == 403
    got = fresh.get(f"/api/folders/id/{fresh.ids['db-nested']}").json()
    assert (got["uid"], got["parentUid"], [p["uid"] for p in got["parents"]]) == \
        ("db-nested", "infra", ["infra"])
    assert list(got)[:5] == ["id", "uid", "title", "url", "hasAcl"]
    r = fresh.put("/api/folders/infra", {"title": "Infra", "version": 7})
    assert (r.status_code, r.json()) == (412, {
        "message": "the folder has been changed by someone else", "status": "version-mismatch"})
    assert fresh.put("/api/folders/infra", {"title": "Infra", "overwrite": True}) \
        .json()["version"] == 2
    children = fresh.get("/api/folders?parentUid=infra").json()
    assert [(f["title"], f["parentUid"]) for f in children] == [("Databases", "infra"),
                                                                ("Sub", "infra")]
    assert list(children[0]) == ["id", "uid", "title", "parentUid"]


def test_folder_move_and_depth(fresh):
    # move Databases to the root: its dashboards follow, the folder hit loses folder fields
    r = fresh.post("/api/folders/db-nested/move", {"parentUid": ""})
    assert r.status_code == 200 and "parentUid" not in r.json()
    assert fresh.titles("folderUIDs=general&type=dash-folder") == [
        "Databases", "Infrastructure", "Team Payments"]
    assert fresh.post("/api/folders/infra/move", {"parentUid": "infra"}).status_code == 400
    # chain of four levels is the maximum
    parent = "infra"
    for level in (2, 3, 4):
        r = fresh.post("/api/folders", {"uid": f"l{level}", "title": f"L{level}",
                                        "parentUid": parent})
        assert r.status_code == 200, r.text
        parent = f"l{level}"
    r = fresh.post("/api/folders", {"title": "L5", "parentUid": "l4"})
    assert (r.status_code, r.json()) == (400, {"message": "Maximum nested folder depth reached"})
    # inherited View reaches a dashboard four levels down
    fresh.post("/api/dashboards/db", {"dashboard": {"uid": "deep", "title": "Deep"},
                                      "folderUid": "l4"})
    assert fresh.titles("query=Deep", "SV") == ["Deep"]
    assert fresh.post("/api/folders/infra/permissions", {"items": []}).status_code == 200
    assert fresh.titles("query=Deep", "SV") == []


# -- permissions endpoints --------------------------------------------------------------------
def test_folder_permissions_listing(fx):
    r = fx.get("/api/folders/payments/permissions")
    assert r.status_code == 200
    (entry,) = r.json()
    assert list(entry) == ["folderId", "created", "updated", "userId", "userUid", "userLogin",
                           "userEmail", "userAvatarUrl", "teamId", "teamUid", "teamEmail",
                           "teamAvatarUrl", "team", "permission", "permissionName", "uid",
                           "title", "slug", "isFolder", "url", "inherited"]
    assert {k: entry[k] for k in ("folderId", "userId", "userLogin", "userEmail", "teamId",
                                  "permission", "permissionName", "uid", "title", "slug",
                                  "isFolder", "url", "inherited")} == {
        "folderId": fx.ids["payments"], "userId": fx.users["bob"], "userLogin": "bob",
        "userEmail": "bob@example.com", "teamId": 0, "permission": 2, "permissionName": "Edit",
        "uid": "payments", "title": "Team Payments", "slug": "", "isFolder": True,
        "url": "/dashboards/f/payments/team-payments", "inherited": False}
    assert fx.get("/api/folders/payments/permissions", "B").status_code == 403
    assert fx.get("/api/folders/nope/permissions").status_code == 404


def test_dashboard_permissions_listing_with_inherited(fx):
    entries = fx.get("/api/dashboards/uid/node-exporter/permissions").json()
    assert [(e.get("role"), e["userId"], e["permission"], e["inherited"]) for e in entries] == [
        (None, 1, 4, False), ("Editor", 0, 2, True), ("Viewer", 0, 1, True)]
    assert all(e["dashboardId"] == fx.ids["node-exporter"] and e["folderUid"] == "infra"
               for e in entries)
    by_id = fx.get(f"/api/dashboards/id/{fx.ids['node-exporter']}/permissions").json()
    assert by_id == entries
    assert fx.get("/api/dashboards/uid/node-exporter/permissions", "L").status_code == 403


def test_permission_updates_validate_and_are_atomic(fresh):
    url = "/api/dashboards/uid/prod-overview/permissions"
    before = fresh.get(url).json()
    for items in ([{"userId": 2, "teamId": 1, "permission": 1}],
                  [{"role": "Viewer", "userId": 2, "permission": 1}],
                  [{"role": "Admin", "permission": 1}],
                  [{"role": "Viewer", "permission": 3}],
                  [{"role": "Viewer", "permission": 1}, {"userId": 999, "permission": 1}]):
        assert fresh.post(url, {"items": items}).status_code == 400, items
    assert fresh.get(url).json() == before
    assert fresh.post("/api/dashboards/uid/nope/permissions", {"items": []}).status_code == 404
    assert fresh.post("/api/folders/nope/permissions", {"items": []}).json() == {
        "message": "folder not found", "status": "not-found"}
    assert fresh.post(url, {"items": []}, who="B").status_code == 403
    assert fresh.post(url, {"items": [{"role": "Editor", "permission": 1}]}).json() == {
        "message": "Dashboard permissions updated"}
    assert fresh.titles("dashboardUIDs=prod-overview", "L") == []
    assert fresh.titles("dashboardUIDs=prod-overview", "B") == ["Production Overview"]
    assert fresh.titles("dashboardUIDs=prod-overview&permission=Edit", "B") == []


# -- stars ------------------------------------------------------------------------------------
def test_stars(fresh):
    ne = fresh.ids["node-exporter"]
    assert fresh.post("/api/user/stars/dashboard/uid/node-exporter").json() == {
        "message": "Dashboard starred!"}
    assert fresh.post("/api/user/stars/dashboard/uid/node-exporter").status_code == 200
    assert fresh.get("/api/user/stars").json() == ["node-exporter"]
    assert fresh.titles("starred=true") == ["Node Exporter"]
    assert fresh.delete(f"/api/user/stars/dashboard/{ne}").json() == {
        "message": "Dashboard unstarred"}
    assert fresh.delete(f"/api/user/stars/dashboard/{ne}").status_code == 200
    assert fresh.titles("starred=true") == []
    assert fresh.post(f"/api/user/stars/dashboard/{ne}", who="SV").status_code == 200
    assert fresh.titles("starred=true", "SV") == ["Node Exporter"]
    for path, status, message in (
            ("/api/user/stars/dashboard/uid/nope", 404, "Dashboard not found"),
            ("/api/user/stars/dashboard/uid/infra", 404, "Dashboard not found"),
            ("/api/user/stars/dashboard/abc", 400, "Invalid dashboard ID"),
            ("/api/user/stars/dashboard/0", 400, "Missing dashboard id")):
        r = fresh.post(path)
        assert (r.status_code, r.json()) == (status, {"message": message}), path
    # deleting a starred dashboard removes the star
    fresh.delete("/api/dashboards/uid/node-exporter")
    assert fresh.get("/api/user/stars", "SV").json() == []


# -- search leftovers -------------------------------------------------------------------------
def test_search_sorting_options(fx):
    names = [o["name"] for o in fx.get("/api/search/sorting").json()["sortOptions"]]
    assert names == ["alpha-asc", "alpha-desc"]


def test_search_parameter_details(fx):
    # empty folderUIDs value = the root; unknown folder uid = nothing
    assert fx.titles("folderUIDs=") == fx.titles("folderUIDs=general")
    assert fx.titles("folderUIDs=nope") == []
    # the singular dashboardUID is ignored when dashboardUIDs is present
    assert fx.titles("dashboardUIDs=redis-cache&dashboardUID=prod-overview") == ["Redis Cache"]
    # bad ids are dropped, good ones kept; dropping all folderIds leaves no folder filter
    assert fx.titles(f"dashboardIds=x&dashboardIds={fx.ids['redis-cache']}") == ["Redis Cache"]
    assert fx.titles("folderIds=abc") == fx.titles("")
    # the first value of a repeated scalar wins; tag=a,b is one tag
    assert fx.titles("query=zzz&query=pay") == []
    assert fx.titles("tag=prod,infra") == []
    assert fx.titles("tag=") == []
    assert fx.titles("type=dash-folder-alerting") == ["Databases", "Infrastructure",
                                                      "Team Payments"]
    # ASCII case-insensitive title match on the whole title, folders included
    assert fx.titles("query=CPU") == ["cpu usage"]
    # absurd values are answered, not failed
    assert fx.titles("page=99999999999999999") == []
    assert fx.titles("limit=5000&page=9223372036854775807") == []
    assert fx.titles("query=" + "x" * 20000) == []


def test_org_user_role_by_org_path_and_home(fresh):
    r = fresh.client.patch(f"/api/orgs/1/users/{fresh.users['alice']}", json={"role": "Editor"},
                           auth=("admin", "admin"))
    assert r.status_code == 200
    assert fresh.post("/api/dashboards/db", {"dashboard": {"title": "Alice's"}}, who="L") \
        .status_code == 200
    assert fresh.client.patch("/api/orgs/2/users/2", json={"role": "Viewer"},
                              auth=("admin", "admin")).status_code == 403
    assert fresh.client.patch("/api/org/users/2", json={"role": "Boss"},
                              auth=("admin", "admin")).status_code == 400
    home = fresh.get("/api/dashboards/home", "L").json()
    assert home["meta"]["isHome"] is True and home["dashboard"]["title"] == "Home"


def test_unknown_route_method_under_api(fx):
    r = fx.client.put("/api/search", auth=("admin", "admin"))
    assert r.status_code == 405


def test_token_expires_after_seconds_to_live(fresh, monkeypatch):
    """A token made with secondsToLive works until then and is refused after (the clock is
    moved on, not waited for)."""
    from services.grafana.common import Clock

    sa = fresh.users["viewer-bot"]
    r = fresh.post(f"/api/serviceaccounts/{sa}/tokens",
                   {"name": "short-lived", "secondsToLive": 60})
    assert r.status_code == 200
    key = r.json()["key"]
    bearer = {"Authorization": f"Bearer {key}"}
    assert fresh.client.get("/api/search", headers=bearer).status_code == 200
    listed = {t["name"]: t for t in
              fresh.get(f"/api/serviceaccounts/{sa}/tokens").json()}["short-lived"]
    assert listed["hasExpired"] is False and 0 < listed["secondsUntilExpiration"] <= 60
    monkeypatch.setattr(Clock, "offset", 61.0)
    r = fresh.client.get("/api/search", headers=bearer)
    assert (r.status_code, r.json()) == (401, {"message": "API key expired"})
    listed = {t["name"]: t for t in
              fresh.get(f"/api/serviceaccounts/{sa}/tokens").json()}["short-lived"]
    assert (listed["hasExpired"], listed["secondsUntilExpiration"]) == (True, 0)
    # a token without secondsToLive does not expire
    assert fresh.search("", "SV").status_code == 200


def test_an_id_past_64_bits_is_a_bad_request_not_a_server_error(fx):
    """Grafana parses ids as 64-bit integers and answers 400 for one past that range; the
    stores cannot bind it (tests/grafana/test_shared_postgres.py), which must not be a 500."""
    big = 2 ** 64
    for method, path, body in (
            ("PATCH", f"/api/org/users/{big}", {"role": "Viewer"}),
            ("GET", f"/api/serviceaccounts/{big}", None),
            ("POST", "/api/dashboards/uid/prod-overview/permissions",
             {"items": [{"userId": big, "permission": 1}]})):
        r = fx.client.request(method, path, json=body, auth=("admin", "admin"))
        assert (r.status_code, r.json()) == (400, {"message": "bad request data"}), path
