"""What a caller may read and change of dashboards and folders addressed by uid or id:
stars, tags, permissions and folder views, for the Grafana routes (each runs inside one
read or one group-commit write)."""

from __future__ import annotations

from typing import Any

from services.grafana import objects
from services.grafana import perms
from services.grafana.common import Caller, GrafanaError, go_int
from storage.grafana import objects as store


def ping(conn: Any) -> None:
    """Grafana's /api/health: the database answers a read."""
    store.ping(conn)


def tag_cloud(conn: Any, caller: Caller) -> list:
    return store.tag_cloud(conn, caller.org_id)


def starred(conn: Any, caller: Caller) -> list:
    return store.starred_uids(conn, caller.user_id)


def star(conn: Any, caller: Caller, on: bool, uid: str | None, raw_id: str | None) -> None:
    dash_id = objects.star_target(conn, caller, uid=uid, raw_id=raw_id)
    (store.star if on else store.unstar)(conn, caller.user_id, dash_id)


def dashboard_by_id(conn: Any, caller: Caller, raw_id: str) -> dict[str, Any]:
    row = store.by_id(conn, caller.org_id, go_int(raw_id) or 0)
    if row is None or row["is_folder"]:
        raise GrafanaError(404, "Dashboard not found")
    return row


def dashboard_perms(conn: Any, caller: Caller, uid: str | None, raw_id: str | None) -> list:
    row = (dashboard_by_id(conn, caller, raw_id) if raw_id is not None
           else store.by_uid(conn, caller.org_id, uid or ""))
    if row is None or row["is_folder"]:
        raise GrafanaError(404, "Dashboard not found")
    return perms.list_entries(conn, caller, row)


def set_dashboard_perms(conn: Any, caller: Caller, uid: str | None, raw_id: str | None,
                         items: list[perms.PermissionItem]) -> None:
    row = (dashboard_by_id(conn, caller, raw_id) if raw_id is not None
           else store.by_uid(conn, caller.org_id, uid or ""))
    if row is None or row["is_folder"]:
        raise GrafanaError(404, "Dashboard not found")
    perms.replace_entries(conn, caller, row, items)


def folder_dto(conn: Any, caller: Caller, uid: str) -> dict:
    return objects.folder_dto(conn, caller, objects.folder_row(conn, caller, uid, 1))


def folder_dto_by_id(conn: Any, caller: Caller, raw_id: str) -> dict:
    row = store.by_id(conn, caller.org_id, go_int(raw_id) or 0)
    if row is None or not row["is_folder"]:
        raise GrafanaError(404, "folder not found", "not-found")
    return folder_dto(conn, caller, row["uid"])


def folder_perms(conn: Any, caller: Caller, uid: str) -> list:
    row = store.by_uid(conn, caller.org_id, uid)
    if row is None or not row["is_folder"]:
        raise GrafanaError(404, "folder not found", "not-found")
    return perms.list_entries(conn, caller, row)


def set_folder_perms(conn: Any, caller: Caller, uid: str,
                      items: list[perms.PermissionItem]) -> None:
    row = store.by_uid(conn, caller.org_id, uid)
    if row is None or not row["is_folder"]:
        raise GrafanaError(404, "folder not found", "not-found")
    perms.replace_entries(conn, caller, row, items)
