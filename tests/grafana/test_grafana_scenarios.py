"""Every scenario table of spec/search.md §4.2, through HTTP, on the §4.1 fixture."""

from __future__ import annotations

import pytest

ALL = ["Databases", "Infrastructure", "Team Payments", "cpu usage", "Network Traffic",
       "Node Exporter", "Payments API", "Payments Errors", "Postgres Stats",
       "Production Overview", "Redis Cache"]
BINARY = ["Databases", "Infrastructure", "Network Traffic", "Node Exporter", "Payments API",
          "Payments Errors", "Postgres Stats", "Production Overview", "Redis Cache",
          "Team Payments", "cpu usage"]
ALICE_ALL = ["Databases", "Infrastructure", "Network Traffic", "Node Exporter",
             "Payments Errors", "Postgres Stats", "Production Overview", "Redis Cache"]
BOTH = {"message": "search supports UIDs or IDs, not both"}

# (scenario, who, query string, expected titles in order)
SCENARIOS = [
    (1, "A", "", ALL),
    (2, "A", "query=pay", ["Team Payments", "Payments API", "Payments Errors"]),
    (3, "A", "query=PRODUCTION", ["Production Overview"]),
    (4, "A", "query=data", ["Databases"]),
    (5, "A", "query=zzz", []),
    (6, "A", "tag=prod", ["Network Traffic", "Payments API", "Postgres Stats",
                          "Production Overview"]),
    (7, "A", "tag=prod&tag=infra", ["Network Traffic"]),
    (8, "A", "tag=db", ["Postgres Stats", "Redis Cache"]),
    (9, "A", "tag=PROD", []),
    (10, "A", "tag=prod&tag=prod", []),
    (11, "A", "tag=prod&query=p", ["Payments API", "Postgres Stats", "Production Overview"]),
    (12, "A", "type=dash-folder", ["Databases", "Infrastructure", "Team Payments"]),
    (13, "A", "type=dash-db", ["cpu usage", "Network Traffic", "Node Exporter", "Payments API",
                               "Payments Errors", "Postgres Stats", "Production Overview",
                               "Redis Cache"]),
    (14, "A", "type=bogus", ALL),
    (15, "A", "query=pay&type=dash-db", ["Payments API", "Payments Errors"]),
    (16, "A", "folderUIDs=infra", ["Databases", "Network Traffic", "Node Exporter"]),
    (17, "A", "folderUIDs=db-nested", ["Postgres Stats", "Redis Cache"]),
    (18, "A", "folderUIDs=general", ["Infrastructure", "Team Payments", "cpu usage",
                                     "Production Overview"]),
    (19, "A", "folderUIDs=infra&folderUIDs=payments", ["Databases", "Network Traffic",
                                                       "Node Exporter", "Payments API",
                                                       "Payments Errors"]),
    (20, "A", "folderUIDs=infra&type=dash-db", ["Network Traffic", "Node Exporter"]),
    (21, "A", "folderIds=<id:payments>", ["Payments API", "Payments Errors"]),
    (22, "A", "folderIds=0", ["Infrastructure", "Team Payments", "cpu usage",
                              "Production Overview"]),
    (24, "A", "dashboardUIDs=redis-cache&dashboardUIDs=prod-overview",
     ["Production Overview", "Redis Cache"]),
    (25, "A", "dashboardUID=prod-overview", ["Production Overview"]),
    (26, "A", "dashboardUIDs=infra", ["Infrastructure"]),
    (27, "A", "dashboardIds=<id:node-exporter>&dashboardIds=<id:redis-cache>",
     ["Node Exporter", "Redis Cache"]),
    (29, "A", "dashboardIds=abc", ALL),
    (31, "A", "limit=5000", ALL),
    (32, "A", "limit=abc&page=-3", ALL),
    (33, "A", "limit=4&page=1", ["Databases", "Infrastructure", "Network Traffic",
                                 "Node Exporter"]),
    (34, "A", "limit=4&page=2", ["Payments API", "Payments Errors", "Postgres Stats",
                                 "Production Overview"]),
    (35, "A", "limit=4&page=3", ["Team Payments", "cpu usage", "Redis Cache"]),
    (36, "A", "limit=4&page=4", []),
    (37, "A", "sort=alpha-asc", BINARY),
    (38, "A", "sort=alpha-desc", list(reversed(BINARY))),
    (39, "A", "sort=foo", BINARY),
    (40, "A", "starred=true", []),
    (41, "L", "", ALICE_ALL),
    (42, "L", "starred=true", ["Production Overview"]),
    (43, "L", "starred=1", ALICE_ALL),
    (44, "L", "starred=true&tag=infra", []),
    (45, "B", "starred=true", []),
    (46, "B", "dashboardUIDs=prod-overview", ["Production Overview"]),
    (47, "L", "query=pay", ["Payments Errors"]),
    (48, "L", "folderUIDs=payments", ["Payments Errors"]),
    (49, "L", "type=dash-folder", ["Databases", "Infrastructure"]),
    (50, "L", "dashboardUIDs=cpu-usage", []),
    (51, "L", "permission=Edit", []),
    (52, "L", "limit=3&page=3", ["Production Overview", "Redis Cache"]),
    (53, "L", "tag=payments", ["Payments Errors"]),
    (54, "B", "", ALL),
    (55, "B", "permission=Edit", ALL),
    (56, "SV", "", ["Databases", "Infrastructure", "Network Traffic", "Node Exporter",
                    "Postgres Stats", "Production Overview", "Redis Cache"]),
    (57, "SV", "tag=payments", []),
    (58, "SN", "", []),
]


def expand(fx, qs: str) -> str:
    for uid, obj_id in fx.ids.items():
        qs = qs.replace(f"<id:{uid}>", str(obj_id))
    return qs


@pytest.mark.parametrize("num,who,qs,expected", SCENARIOS, ids=[f"s{s[0]}" for s in SCENARIOS])
def test_search_scenario(fx, num, who, qs, expected):
    assert fx.titles(expand(fx, qs), who) == expected


@pytest.mark.parametrize("num,qs,status,body", [
    (23, "folderIds=<id:payments>&folderUIDs=infra", 400, BOTH),
    (28, "dashboardIds=<id:node-exporter>&dashboardUIDs=prod-overview", 400, BOTH),
    (30, "limit=5001", 422, {"message": "Limit is above maximum allowed (5000), use page "
                                        "parameter to access hits beyond limit"}),
])
def test_search_errors(fx, num, qs, status, body):
    r = fx.search(expand(fx, qs))
    assert (r.status_code, r.json()) == (status, body)
    assert r.headers["content-type"].startswith("application/json")


def test_s42_hit_is_starred(fx):
    assert [h["isStarred"] for h in fx.search("starred=true", "L").json()] == [True]


def test_s46_other_users_star_not_visible(fx):
    assert [h["isStarred"] for h in fx.search("dashboardUIDs=prod-overview", "B").json()] \
        == [False]


def test_s48_hit_carries_invisible_folder(fx):
    (hit,) = fx.search("folderUIDs=payments", "L").json()
    assert hit["folderTitle"] == "Team Payments"
    assert hit["folderUrl"] == "/dashboards/f/payments/team-payments"


def test_s59_no_credentials(fx):
    r = fx.client.get("/api/search")
    assert (r.status_code, r.json()) == (401, {"message": "Unauthorized"})


def test_s60_wrong_password(fx):
    assert fx.client.get("/api/search", auth=("alice", "wrong")).status_code == 401


def test_s61_bad_token_checksum(fx):
    r = fx.client.get("/api/search", headers={
        "Authorization": "Bearer glsa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA_00000000"})
    assert r.status_code == 401


def test_trailing_slash(fx):
    assert [h["title"] for h in fx.get("/api/search/?query=pay").json()] == \
        ["Team Payments", "Payments API", "Payments Errors"]


# -- hit JSON (§1.4) ----------------------------------------------------------------------
def test_hit_json_exact(fx):
    hits = {h["uid"]: h for h in fx.search("", "L").json()}
    ids = fx.ids
    assert list(hits["infra"].items()) == list({
        "id": ids["infra"], "uid": "infra", "orgId": 1, "title": "Infrastructure",
        "uri": "db/infrastructure", "url": "/dashboards/f/infra/infrastructure", "slug": "",
        "type": "dash-folder", "tags": [], "isStarred": False, "sortMeta": 0,
        "isDeleted": False}.items())
    assert list(hits["db-nested"].items()) == list({
        "id": ids["db-nested"], "uid": "db-nested", "orgId": 1, "title": "Databases",
        "uri": "db/databases", "url": "/dashboards/f/db-nested/databases", "slug": "",
        "type": "dash-folder", "tags": [], "isStarred": False, "folderId": ids["infra"],
        "folderUid": "infra", "folderTitle": "Infrastructure",
        "folderUrl": "/dashboards/f/infra/infrastructure", "sortMeta": 0,
        "isDeleted": False}.items())
    assert list(hits["postgres-stats"].items()) == list({
        "id": ids["postgres-stats"], "uid": "postgres-stats", "orgId": 1,
        "title": "Postgres Stats", "uri": "db/postgres-stats",
        "url": "/d/postgres-stats/postgres-stats", "slug": "", "type": "dash-db",
        "tags": ["db", "prod"], "isStarred": False, "folderId": ids["db-nested"],
        "folderUid": "db-nested", "folderTitle": "Databases",
        "folderUrl": "/dashboards/f/db-nested/databases", "sortMeta": 0,
        "isDeleted": False}.items())
    assert list(hits["prod-overview"].items()) == list({
        "id": ids["prod-overview"], "uid": "prod-overview", "orgId": 1,
        "title": "Production Overview", "uri": "db/production-overview",
        "url": "/d/prod-overview/production-overview", "slug": "", "type": "dash-db",
        "tags": ["overview", "prod"], "isStarred": True, "sortMeta": 0,
        "isDeleted": False}.items())


def test_tags_sorted_by_default_and_a_set_with_sort(fx):
    by_default = {h["title"]: h["tags"] for h in fx.search().json()}
    assert by_default["Network Traffic"] == ["infra", "network", "prod"]
    with_sort = {h["title"]: h["tags"] for h in fx.search("sort=alpha-asc").json()}
    assert sorted(with_sort["Network Traffic"]) == ["infra", "network", "prod"]
    # the set comes in one order whatever the store (not as saved: prod, infra, network)
    assert with_sort["Network Traffic"] == ["infra", "network", "prod"]


def test_fixture_ids_share_one_sequence(fx):
    assert [fx.ids[u] for u in ("infra", "db-nested", "payments", "prod-overview", "cpu-usage",
                                "node-exporter", "network-traffic", "postgres-stats",
                                "redis-cache", "payments-api", "payments-errors")] == \
        list(range(1, 12))


# -- companion checks -------------------------------------------------------------------------
TAG_CLOUD = [{"term": "db", "count": 2}, {"term": "infra", "count": 3},
             {"term": "linux", "count": 1}, {"term": "network", "count": 1},
             {"term": "overview", "count": 1}, {"term": "payments", "count": 2},
             {"term": "perf", "count": 1}, {"term": "prod", "count": 4}]


@pytest.mark.parametrize("who", ["A", "L"])
def test_tag_cloud_ignores_permissions(fx, who):
    r = fx.get("/api/dashboards/tags", who)
    assert (r.status_code, r.json()) == (200, TAG_CLOUD)


def test_dashboard_read_permissions(fx):
    assert fx.get("/api/dashboards/uid/cpu-usage", "L").status_code == 403
    r = fx.get("/api/dashboards/uid/cpu-usage", "B")
    assert r.status_code == 200
    meta = r.json()["meta"]
    assert meta["canSave"] is True and meta["folderTitle"] == "General"
    assert list(r.json()) == ["meta", "dashboard"]


def test_folders_list_for_viewer(fx):
    r = fx.get("/api/folders", "L")
    assert (r.status_code, r.json()) == (200, [{"id": 1, "uid": "infra",
                                                "title": "Infrastructure"}])


# -- mutation scenarios, each on a fresh copy of the fixture ------------------------------------
def test_s62_delete_dashboard(fresh):
    r = fresh.delete("/api/dashboards/uid/redis-cache")
    assert r.status_code == 200
    assert r.json() == {"message": "Dashboard Redis Cache deleted", "title": "Redis Cache",
                        "uid": "redis-cache"}
    assert fresh.titles("tag=db") == ["Postgres Stats"]


def test_s63_update_renames_slug(fresh):
    r = fresh.post("/api/dashboards/db", {"dashboard": {
        "uid": "prod-overview", "title": "Production Overview v2", "tags": ["prod", "overview"],
        "version": 1}, "folderUid": ""})
    assert r.status_code == 200 and r.json()["version"] == 2
    (hit,) = fresh.search("query=v2").json()
    assert hit["title"] == "Production Overview v2"
    assert hit["url"] == "/d/prod-overview/production-overview-v2"
    assert hit["uri"] == "db/production-overview-v2"


def test_s64_version_mismatch(fresh):
    r = fresh.post("/api/dashboards/db", {"dashboard": {
        "uid": "prod-overview", "title": "Production Overview v2", "tags": ["prod", "overview"],
        "version": 0}, "folderUid": ""})
    assert (r.status_code, r.json()) == (412, {
        "message": "The dashboard has been changed by someone else", "status": "version-mismatch"})
    assert fresh.titles("query=v2") == []


def test_s65_delete_folder_deletes_subtree(fresh):
    assert fresh.delete("/api/folders/db-nested").status_code == 200
    assert fresh.titles("folderUIDs=infra") == ["Network Traffic", "Node Exporter"]
    assert fresh.titles("tag=db") == []


def test_s66_rename_folder(fresh):
    r = fresh.put("/api/folders/infra", {"title": "Infra Core", "version": 1})
    assert r.status_code == 200
    hits = fresh.search("folderUIDs=infra").json()
    assert [h["title"] for h in hits] == ["Databases", "Network Traffic", "Node Exporter"]
    assert {(h["folderTitle"], h["folderUrl"]) for h in hits} == {
        ("Infra Core", "/dashboards/f/infra/infra-core")}


def test_s67_clear_folder_permissions(fresh):
    assert fresh.post("/api/folders/infra/permissions", {"items": []}).status_code == 200
    assert fresh.titles("", "L") == ["Payments Errors", "Production Overview"]


def test_s68_duplicate_titles_allowed(fresh):
    r = fresh.post("/api/dashboards/db", {"dashboard": {"title": "Production Overview",
                                                        "tags": []}})
    assert r.status_code == 200
    hits = fresh.search("query=Production Overview").json()
    assert [h["title"] for h in hits] == ["Production Overview", "Production Overview"]
    assert hits[0]["id"] < hits[1]["id"]
