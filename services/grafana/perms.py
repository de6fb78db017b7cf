"""Who may do what to a folder or dashboard (spec/search.md §2), and the managed-permission
entries as the permissions endpoints show and replace them (§3.5)."""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

import msgspec

from services.grafana.common import (ADMIN, EDIT, LEVEL_NAMES, VIEW, Caller, GrafanaError,
                                     bad_request, now_text)
from services.grafana.search import folder_url, subject_of
from storage.grafana import objects as store
from storage.grafana import identity as ident


def level_of(conn: sqlite3.Connection, caller: Caller, row: dict[str, Any]) -> int:
    """Effective level: the best entry on the row or any ancestor folder; org Admin is 4."""
    if caller.is_org_admin:
        return ADMIN
    chain = [row["id"]] + [a["id"] for a in store.ancestors(conn, row["parent_id"])]
    return store.level_on(conn, subject_of(caller), chain)


def can_create_in(conn: sqlite3.Connection, caller: Caller, parent: dict[str, Any] | None) -> bool:
    if parent is None:
        return caller.role in ("Admin", "Editor")
    return level_of(conn, caller, parent) >= EDIT


def default_entries(caller: Caller, at_root: bool) -> list[tuple[int | None, int | None,
                                                                  str | None, int]]:
    """Entries Grafana 11 writes at creation: root objects get role defaults too."""
    entries: list[tuple[int | None, int | None, str | None, int]] = [
        (caller.user_id, None, None, ADMIN)]
    if at_root:
        entries += [(None, None, "Editor", EDIT), (None, None, "Viewer", VIEW)]
    return entries


# -- the permissions endpoints --------------------------------------------------------------
class PermissionItem(msgspec.Struct):
    userId: int | None = None
    teamId: int | None = None
    role: str | None = None
    permission: int = 0


class PermissionUpdate(msgspec.Struct):
    items: list[PermissionItem] | None = None


def validate_items(conn: sqlite3.Connection, caller: Caller,
                   items: list[PermissionItem]) -> list[tuple[int | None, int | None,
                                                               str | None, int]]:
    out = []
    for item in items:
        user_id = item.userId or None
        team_id = item.teamId or None
        role = item.role or None
        if user_id and team_id:
            raise bad_request("team and user permissions cannot have an associated role")
        if role and (user_id or team_id):
            raise bad_request("permissions cannot have both a user and team")
        if not (user_id or team_id or role):
            raise bad_request("permission item needs a userId, a teamId or a role")
        if role and role not in ("Viewer", "Editor"):
            raise bad_request(f"invalid role: {role}")
        if item.permission not in (VIEW, EDIT, ADMIN):
            raise bad_request(f"invalid permission: {item.permission}")
        if user_id and ident.org_role(conn, caller.org_id, user_id) is None:
            raise bad_request("user not found")
        if team_id and ident.team_by_id(conn, caller.org_id, team_id) is None:
            raise bad_request("team not found")
        out.append((user_id, team_id, role, item.permission))
    return out


def _avatar(email: str | None) -> str:
    return "/avatar/" + hashlib.md5((email or "").strip().lower().encode()).hexdigest()


def entry(p: dict[str, Any], obj: dict[str, Any], *, inherited: bool,
          dashboard: dict[str, Any] | None, parent_uid: str) -> dict[str, Any]:
    """One entry in Grafana's field order; `obj` is the object the entry is attached to."""
    out: dict[str, Any] = {}
    is_folder = bool(obj["is_folder"])
    if dashboard is not None:
        out["dashboardId"] = dashboard["id"]
    if is_folder:
        out["folderId"] = obj["id"]
    if parent_uid:
        out["folderUid"] = parent_uid
    out["created"] = p["created"]
    out["updated"] = p["updated"]
    out["userId"] = p["user_id"] or 0
    out["userUid"] = p["user_uid"] or ""
    out["userLogin"] = p["user_login"] or ""
    out["userEmail"] = p["user_email"] or ""
    out["userAvatarUrl"] = _avatar(p["user_email"]) if p["user_id"] else ""
    out["teamId"] = p["team_id"] or 0
    out["teamUid"] = p["team_uid"] or ""
    out["teamEmail"] = p["team_email"] or ""
    out["teamAvatarUrl"] = _avatar(p["team_email"]) if p["team_id"] else ""
    out["team"] = p["team_name"] or ""
    if p["role"]:
        out["role"] = p["role"]
    out["permission"] = p["level"]
    out["permissionName"] = LEVEL_NAMES.get(p["level"], "")
    target = dashboard or obj
    out["uid"] = target["uid"]
    out["title"] = target["title"]
    out["slug"] = "" if target["is_folder"] else target["slug"]
    out["isFolder"] = bool(target["is_folder"])
    out["url"] = (folder_url(target["uid"], target["title"]) if target["is_folder"]
                  else f"/d/{target['uid']}/{target['slug']}")
    out["inherited"] = inherited
    return out


def list_entries(conn: sqlite3.Connection, caller: Caller, row: dict[str, Any]) -> list[dict]:
    if level_of(conn, caller, row) < ADMIN:
        raise GrafanaError(403, "You'll need additional permissions to perform this action.")
    chain = store.ancestors(conn, row["parent_id"])
    parent_uid = chain[-1]["uid"] if chain else ""
    if row["is_folder"]:
        return [entry(p, row, inherited=False, dashboard=None, parent_uid=parent_uid)
                for p in store.permissions_on(conn, [row["id"]])]
    own = store.permissions_on(conn, [row["id"]])
    out = [entry(p, row, inherited=False, dashboard=row, parent_uid=parent_uid) for p in own]
    best: dict[tuple, int] = {}
    for p in own:
        key = (p["user_id"], p["team_id"], p["role"])
        best[key] = max(best.get(key, 0), p["level"])
    by_folder = {f["id"]: f for f in chain}
    for p in store.permissions_on(conn, [f["id"] for f in reversed(chain)]):
        key = (p["user_id"], p["team_id"], p["role"])
        if best.get(key, 0) >= p["level"]:
            continue
        folder = by_folder[p["object_id"]]
        entry_row = entry(p, folder, inherited=True, dashboard=row, parent_uid=parent_uid)
        entry_row.pop("folderId", None)
        out.append(entry_row)
    return out


def replace_entries(conn: sqlite3.Connection, caller: Caller, row: dict[str, Any],
                    items: list[PermissionItem]) -> None:
    if level_of(conn, caller, row) < ADMIN:
        raise GrafanaError(403, "You'll need additional permissions to perform this action.")
    entries = validate_items(conn, caller, items)
    store.replace_permissions(conn, caller.org_id, row["id"], entries, now_text())
