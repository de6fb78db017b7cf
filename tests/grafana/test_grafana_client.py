"""grafana-client (the real package) against a real `logstore serve` (granian subprocess):
token and Basic auth, folders, dashboards, stars, every search parameter, a Viewer's view."""

from __future__ import annotations

import pytest
from grafana_client import GrafanaApi
from grafana_client.client import (
    GrafanaBadInputError,
    GrafanaClientError,
    GrafanaUnauthorizedError,
)

from tests.grafana.conftest import DASHBOARDS, grafana_config


@pytest.fixture
def live(make_server, grafana_store, tmp_path):
    data = tmp_path / "data"
    return make_server(grafana_config(data, grafana_store.database(data), own_process=True),
                       data)


def titles(hits: list[dict]) -> list[str]:
    return [h["title"] for h in hits]


def test_grafana_client_end_to_end(live):
    admin = GrafanaApi.from_url(live.url, credential=("admin", "admin"))
    assert admin.connect()["version"] == "11.3.0"
    assert admin.version == "11.3.0"

    # identity: a Viewer user, an Editor user, a service account with an Admin token
    alice = admin.admin.create_user({"name": "Alice", "email": "alice@example.com",
                                     "login": "alice", "password": "alice-pass"})["id"]
    bob = admin.admin.create_user({"name": "Bob", "email": "bob@example.com",
                                   "login": "bob", "password": "bob-pass"})["id"]
    admin.organization.update_user_current_organization(bob, {"role": "Editor"})
    sa = admin.serviceaccount.create({"name": "ci-bot", "role": "Admin"})
    key = admin.serviceaccount.create_token(sa["id"], {"name": "ci"})["key"]
    assert key.startswith("glsa_")
    assert "key" not in admin.serviceaccount.get_tokens(sa["id"])[0]

    # everything else is created with the token
    api = GrafanaApi.from_url(live.url, credential=key)
    infra = api.folder.create_folder("Infrastructure", uid="infra")
    assert infra["url"] == "/dashboards/f/infra/infrastructure"
    api.folder.create_folder("Databases", uid="db-nested", parent_uid="infra")
    api.folder.create_folder("Team Payments", uid="payments")
    saved = {}
    for uid, title, folder, tags in DASHBOARDS:  # the spec §4.1 fixture
        out = api.dashboard.update_dashboard({"dashboard": {"uid": uid, "title": title,
                                                            "tags": tags},
                                              "folderUid": folder, "overwrite": False})
        assert out["status"] == "success" and out["version"] == 1
        saved[uid] = out["id"]
    api.folder.update_folder_permissions("payments", [{"userId": bob, "permission": 2}])
    api.dashboard.update_permissions_by_uid("cpu-usage", [{"role": "Editor", "permission": 2}])
    api.dashboard.update_permissions_by_uid("payments-errors",
                                            [{"userId": alice, "permission": 1}])

    # stars: by uid (token principal) and by id (Basic user)
    api.user.star_dashboard("node-exporter")
    as_alice = GrafanaApi.from_url(live.url, credential=("alice", "alice-pass"))
    as_alice.user.star_dashboard(saved["prod-overview"])

    s = api.search.search_dashboards
    assert titles(s()) == ["Databases", "Infrastructure", "Team Payments", "cpu usage",
                           "Network Traffic", "Node Exporter", "Payments API",
                           "Payments Errors", "Postgres Stats", "Production Overview",
                           "Redis Cache"]
    assert titles(s(query="pay")) == ["Team Payments", "Payments API", "Payments Errors"]
    assert titles(s(tag=["prod", "infra"])) == ["Network Traffic"]
    assert titles(s(tag="db")) == ["Postgres Stats", "Redis Cache"]
    assert titles(s(type_="dash-folder")) == ["Databases", "Infrastructure", "Team Payments"]
    assert titles(s(dashboard_ids=[saved["node-exporter"], saved["redis-cache"]])) == \
        ["Node Exporter", "Redis Cache"]
    assert titles(s(dashboard_uids=["redis-cache", "prod-overview"])) == \
        ["Production Overview", "Redis Cache"]
    assert titles(s(folder_ids=[infra["id"]])) == ["Databases", "Network Traffic",
                                                   "Node Exporter"]
    assert titles(s(folder_uids=["general"])) == ["Infrastructure", "Team Payments",
                                                  "cpu usage", "Production Overview"]
    assert titles(s(starred=True)) == ["Node Exporter"]
    assert titles(s(starred=False)) == titles(s())
    assert titles(s(limit=4, page=3)) == ["Team Payments", "cpu usage", "Redis Cache"]
    assert s(limit=4, page=4) == []
    with pytest.raises(GrafanaBadInputError):
        s(dashboard_ids=[1], dashboard_uids=["infra"])
    with pytest.raises(GrafanaClientError) as err:
        s(limit=5001)
    assert err.value.status_code == 422

    # the Viewer sees only what permissions allow, and only her own stars
    assert titles(as_alice.search.search_dashboards()) == [
        "Databases", "Infrastructure", "Network Traffic", "Node Exporter", "Payments Errors",
        "Postgres Stats", "Production Overview", "Redis Cache"]
    starred = as_alice.search.search_dashboards(starred=True)
    assert titles(starred) == ["Production Overview"] and starred[0]["isStarred"] is True
    assert as_alice.search.search_dashboards(query="pay")[0]["folderTitle"] == "Team Payments"
    with pytest.raises(GrafanaClientError) as err:
        as_alice.dashboard.get_dashboard("cpu-usage")
    assert err.value.status_code == 403
    with pytest.raises(GrafanaClientError) as err:
        as_alice.folder.create_folder("Mine")
    assert err.value.status_code == 403
    as_bob = GrafanaApi.from_url(live.url, credential=("bob", "bob-pass"))
    assert as_bob.dashboard.get_dashboard("cpu-usage")["meta"]["canSave"] is True

    # reads, updates, tags, deletes through the client
    got = api.dashboard.get_dashboard("node-exporter")
    assert got["meta"]["folderTitle"] == "Infrastructure" and got["meta"]["isStarred"] is True
    got["dashboard"]["title"] = "Node Exporter Full"
    out = api.dashboard.update_dashboard({"dashboard": got["dashboard"], "folderUid": "infra"})
    assert (out["version"], out["url"]) == (2, "/d/node-exporter/node-exporter-full")
    with pytest.raises(GrafanaClientError) as err:
        api.dashboard.update_dashboard({"dashboard": got["dashboard"], "folderUid": "infra"})
    assert err.value.status_code == 412
    assert {"term": "prod", "count": 4} in api.dashboard.get_dashboards_tags()
    assert [f["uid"] for f in as_alice.folder.get_all_folders()] == ["infra"]
    assert api.folder.get_folder("db-nested")["parentUid"] == "infra"
    api.dashboard.delete_dashboard("redis-cache")
    assert titles(s(tag="db")) == ["Postgres Stats"]
    api.folder.delete_folder("payments")
    assert titles(s(query="pay")) == []
    api.user.unstar_dashboard("node-exporter")
    assert s(starred=True) == []

    # a deleted token stops working; bad credentials are 401
    api.serviceaccount.delete_token(sa["id"], admin.serviceaccount.get_tokens(sa["id"])[0]["id"])
    with pytest.raises(GrafanaUnauthorizedError):
        api.search.search_dashboards()
    with pytest.raises(GrafanaUnauthorizedError):
        GrafanaApi.from_url(live.url, credential=("alice", "nope")).search.search_dashboards()
