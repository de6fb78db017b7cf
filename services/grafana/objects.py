"""Dashboards and folders: save with versions, read, delete, move, stars (spec §3.2-§3.4).

Every function here takes the writer's (or a reader's) connection and raises GrafanaError:
services/grafana/service.py runs the writing ones inside one `db.write`, so a failed check
rolls everything back and the check and the write see the same state."""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

import msgspec

from services.grafana.auth import new_uid
from services.grafana.common import (ADMIN, EDIT, VIEW, Caller, GrafanaError, bad_request,
                                     dashboard_not_found, folder_not_found, forbidden, go_int,
                                     now_text)
from services.grafana.perms import can_create_in, default_entries, level_of
from services.grafana.search import folder_url, subject_of
from services.grafana.slug import slugify
from storage.grafana import objects as store

_UID_OK = re.compile(r"^[A-Za-z0-9_-]*$")
MAX_FOLDER_DEPTH = 4
ZERO_TIME = "0001-01-01T00:00:00Z"


def check_uid(uid: str) -> None:
    if not _UID_OK.match(uid):
        raise bad_request("uid contains illegal characters")
    if len(uid) > 40:
        raise bad_request("uid too long, max 40 characters")


class SaveDashboard(msgspec.Struct):
    dashboard: dict[str, Any] | None = None
    folderUid: str | None = None
    folderId: int | None = None
    overwrite: bool = False
    message: str = ""
    isFolder: bool = False


def _folder_target(conn: sqlite3.Connection, caller: Caller, body: SaveDashboard) \
        -> dict[str, Any] | None:
    if body.folderUid:
        row = store.by_uid(conn, caller.org_id, body.folderUid)
    elif body.folderId:
        row = store.by_id(conn, caller.org_id, body.folderId)
    else:
        return None
    if row is None or not row["is_folder"]:
        raise bad_request("folder not found")
    return row


def save_dashboard(conn: sqlite3.Connection, caller: Caller, body: SaveDashboard) -> dict:
    dash = body.dashboard
    if not isinstance(dash, dict):
        raise bad_request()
    if body.isFolder or dash.get("isFolder") is True:
        raise bad_request("Use folders endpoint for saving folders.")
    title = dash.get("title")
    if not isinstance(title, str) or not title.strip():
        raise GrafanaError(400, "Dashboard title cannot be empty", "empty-name")
    if len(title) > 5000:
        raise GrafanaError(400, "Dashboard title cannot contain more than 5 000 characters",
                           "title-too-long")
    uid = dash.get("uid") or ""
    if not isinstance(uid, str):
        raise bad_request()
    check_uid(uid)
    raw_id = dash.get("id")
    dash_id = raw_id if isinstance(raw_id, int) and not isinstance(raw_id, bool) else 0
    if len(body.message) > 500:
        raise bad_request("message too long, max 500 characters")
    existing = None
    if dash_id > 0:
        existing = store.by_id(conn, caller.org_id, dash_id)
        if existing is None:
            raise GrafanaError(404, "Dashboard not found", "not-found")
        if uid and uid != existing["uid"]:
            other = store.by_uid(conn, caller.org_id, uid)
            if other is not None:
                raise bad_request("A dashboard with the same uid already exists")
    elif uid:
        existing = store.by_uid(conn, caller.org_id, uid)
    if existing is not None and existing["is_folder"]:
        raise bad_request("Dashboard cannot be changed to a folder")
    parent = _folder_target(conn, caller, body)
    parent_id = parent["id"] if parent else None
    if existing is None:
        if not can_create_in(conn, caller, parent):
            raise forbidden("Access denied to save dashboard")
        version = 1
    else:
        if level_of(conn, caller, existing) < EDIT or (
                parent_id != existing["parent_id"] and not can_create_in(conn, caller, parent)):
            raise forbidden("Access denied to save dashboard")
        given = dash.get("version")
        given = given if isinstance(given, int) and not isinstance(given, bool) else 0
        if not body.overwrite and given != existing["version"]:
            raise GrafanaError(412, "The dashboard has been changed by someone else",
                               "version-mismatch")
        version = existing["version"] + 1
    uid = uid or (existing["uid"] if existing else new_uid())
    slug = slugify(title)
    now = now_text()
    model = dict(dash)
    raw_tags = dash.get("tags")
    tags = list(dict.fromkeys(t for t in raw_tags if isinstance(t, str))) \
        if isinstance(raw_tags, list) else []
    if existing is None:
        new_id = store.insert_object(conn, org_id=caller.org_id, uid=uid, title=title, slug=slug,
                                     is_folder=False, parent_id=parent_id, data=model,
                                     version=version, now=now, user_id=caller.user_id)
        store.add_permissions(conn, caller.org_id, new_id,
                              default_entries(caller, parent is None), now)
    else:
        new_id = existing["id"]
    model.update(id=new_id, uid=uid, version=version)
    store.update_object(conn, new_id, uid=uid, title=title, slug=slug, parent_id=parent_id,
                        data=model, version=version, now=now, user_id=caller.user_id)
    store.set_tags(conn, new_id, tags)
    return {"folderUid": parent["uid"] if parent else "", "id": new_id, "slug": slug,
            "status": "success", "uid": uid, "url": f"/d/{uid}/{slug}", "version": version}


def visible_dashboard(conn: sqlite3.Connection, caller: Caller, uid: str,
                      need: int = VIEW) -> tuple[dict[str, Any], int]:
    row = store.by_uid(conn, caller.org_id, uid)
    if row is None or row["is_folder"]:
        raise dashboard_not_found()
    level = level_of(conn, caller, row)
    if level < need:
        raise forbidden("Access denied to this dashboard" if need == VIEW else
                        "You'll need additional permissions to perform this action.")
    return row, level


def get_dashboard(conn: sqlite3.Connection, caller: Caller, uid: str) -> dict[str, Any]:
    row, level = visible_dashboard(conn, caller, uid)
    chain = store.ancestors(conn, row["parent_id"])
    parent = chain[-1] if chain else None
    logins = store.user_logins(conn, [row["created_by"], row["updated_by"]])
    meta: dict[str, Any] = {}
    if store.starred_among(conn, caller.user_id, [row["id"]]):
        meta["isStarred"] = True
    meta.update({
        "type": "db", "canSave": level >= EDIT, "canEdit": level >= EDIT,
        "canAdmin": level >= ADMIN, "canStar": True, "canDelete": level >= EDIT,
        "slug": row["slug"], "url": f"/d/{row['uid']}/{row['slug']}", "expires": ZERO_TIME,
        "created": row["created"], "updated": row["updated"],
        "updatedBy": logins.get(row["updated_by"], "Anonymous"),
        "createdBy": logins.get(row["created_by"], "Anonymous"), "version": row["version"],
        "hasAcl": False, "isFolder": False, "folderId": parent["id"] if parent else 0,
        "folderUid": parent["uid"] if parent else "",
        "folderTitle": parent["title"] if parent else "General",
        "folderUrl": folder_url(parent["uid"], parent["title"]) if parent else "",
        "provisioned": False, "provisionedExternalId": ""})
    model = json.loads(row["data"])
    model.update(id=row["id"], uid=row["uid"], version=row["version"])
    return {"meta": meta, "dashboard": model}


def delete_dashboard(conn: sqlite3.Connection, caller: Caller, uid: str) -> dict[str, Any]:
    row = store.by_uid(conn, caller.org_id, uid)
    if row is None:
        raise dashboard_not_found()
    if row["is_folder"]:
        raise bad_request("Use folders endpoint for deleting folders.")
    if level_of(conn, caller, row) < EDIT:
        raise forbidden()
    store.delete_objects(conn, [row["id"]])
    return {"message": f"Dashboard {row['title']} deleted", "title": row["title"],
            "uid": row["uid"]}


def star_target(conn: sqlite3.Connection, caller: Caller, *, uid: str | None = None,
                raw_id: str | None = None) -> int:
    if raw_id is not None:
        dash_id = go_int(raw_id)
        if dash_id is None:
            raise bad_request("Invalid dashboard ID")
        if dash_id <= 0:
            raise bad_request("Missing dashboard id")
        row = store.by_id(conn, caller.org_id, dash_id)
    else:
        if not uid:
            raise bad_request("Invalid dashboard UID")
        row = store.by_uid(conn, caller.org_id, uid)
    if row is None or row["is_folder"]:
        raise dashboard_not_found()
    return row["id"]


# -- folders ---------------------------------------------------------------------------------
class CreateFolder(msgspec.Struct):
    uid: str | None = None
    title: str | None = None
    parentUid: str | None = None
    description: str | None = None


class UpdateFolder(msgspec.Struct):
    title: str | None = None
    description: str | None = None
    version: int = 0
    overwrite: bool = False
    uid: str | None = None


class MoveFolder(msgspec.Struct):
    parentUid: str | None = None


def folder_row(conn: sqlite3.Connection, caller: Caller, uid: str, need: int) -> dict[str, Any]:
    row = store.by_uid(conn, caller.org_id, uid)
    if row is None or not row["is_folder"]:
        raise folder_not_found()
    if level_of(conn, caller, row) < need:
        raise forbidden()
    return row


def folder_dto(conn: sqlite3.Connection, caller: Caller, row: dict[str, Any]) -> dict[str, Any]:
    chain = store.ancestors(conn, row["parent_id"])
    logins = store.user_logins(conn, [r[k] for r in chain + [row]
                                      for k in ("created_by", "updated_by")])

    def base(r: dict[str, Any]) -> dict[str, Any]:
        level = level_of(conn, caller, r)
        out = {"id": r["id"], "uid": r["uid"], "title": r["title"],
               "url": folder_url(r["uid"], r["title"]), "hasAcl": False,
               "canSave": level >= EDIT, "canEdit": level >= EDIT, "canAdmin": level >= ADMIN,
               "canDelete": level >= EDIT,
               "createdBy": logins.get(r["created_by"], "Anonymous"), "created": r["created"],
               "updatedBy": logins.get(r["updated_by"], "Anonymous"), "updated": r["updated"]}
        if r["version"]:
            out["version"] = r["version"]
        return out

    out = base(row)
    if chain:
        out["parentUid"] = chain[-1]["uid"]
    out["parents"] = [base(r) for r in chain]
    return out


def _folder_parent(conn: sqlite3.Connection, caller: Caller, parent_uid: str | None) \
        -> dict[str, Any] | None:
    if not parent_uid or parent_uid == "general":
        return None
    parent = store.by_uid(conn, caller.org_id, parent_uid)
    if parent is None or not parent["is_folder"]:
        raise folder_not_found()
    return parent


def _check_depth(conn: sqlite3.Connection, parent: dict[str, Any] | None, height: int) -> None:
    if parent is None:
        return
    depth = len(store.ancestors(conn, parent["id"]))  # levels of folders down to the parent
    if depth + 1 + height > MAX_FOLDER_DEPTH:
        raise bad_request("Maximum nested folder depth reached")


def create_folder(conn: sqlite3.Connection, caller: Caller, body: CreateFolder) -> dict:
    title = (body.title or "").strip()
    if not title:
        raise bad_request("folder title cannot be empty")
    uid = body.uid or ""
    if uid == "general":
        raise bad_request("uid general is reserved")
    check_uid(uid)
    if uid and store.by_uid(conn, caller.org_id, uid) is not None:
        raise GrafanaError(409, "a folder/dashboard with the same uid already exists")
    parent = _folder_parent(conn, caller, body.parentUid)
    if not can_create_in(conn, caller, parent):
        raise forbidden()
    _check_depth(conn, parent, 0)
    parent_id = parent["id"] if parent else None
    if store.folder_title_taken(conn, caller.org_id, parent_id, title):
        raise GrafanaError(409, "a folder with the same name already exists in this parent")
    now = now_text()
    folder_id = store.insert_object(
        conn, org_id=caller.org_id, uid=uid or new_uid(), title=title, slug=slugify(title),
        is_folder=True, parent_id=parent_id, data={"description": body.description or ""},
        version=1, now=now, user_id=caller.user_id)
    store.add_permissions(conn, caller.org_id, folder_id, default_entries(caller, parent is None),
                          now)
    return folder_dto(conn, caller, store.by_id(conn, caller.org_id, folder_id))


def update_folder(conn: sqlite3.Connection, caller: Caller, uid: str, body: UpdateFolder) -> dict:
    row = folder_row(conn, caller, uid, EDIT)
    if not body.overwrite and body.version != row["version"]:
        raise GrafanaError(412, "the folder has been changed by someone else",
                           "version-mismatch")
    title = (body.title or "").strip() or row["title"]
    if title != row["title"] and store.folder_title_taken(conn, caller.org_id, row["parent_id"],
                                                          title, row["id"]):
        raise GrafanaError(409, "a folder with the same name already exists in this parent")
    new_uid_ = body.uid or row["uid"]
    if new_uid_ != row["uid"]:
        if new_uid_ == "general":
            raise bad_request("uid general is reserved")
        check_uid(new_uid_)
        if store.by_uid(conn, caller.org_id, new_uid_) is not None:
            raise GrafanaError(409, "a folder/dashboard with the same uid already exists")
    data = json.loads(row["data"])
    if body.description is not None:
        data["description"] = body.description
    store.update_object(conn, row["id"], uid=new_uid_, title=title, slug=slugify(title),
                        parent_id=row["parent_id"], data=data, version=row["version"] + 1,
                        now=now_text(), user_id=caller.user_id)
    return folder_dto(conn, caller, store.by_id(conn, caller.org_id, row["id"]))


def delete_folder(conn: sqlite3.Connection, caller: Caller, uid: str) -> dict:
    row = folder_row(conn, caller, uid, EDIT)
    store.delete_objects(conn, store.subtree_ids(conn, row["id"]))
    return {"message": "Folder deleted"}


def move_folder(conn: sqlite3.Connection, caller: Caller, uid: str, body: MoveFolder) -> dict:
    row = folder_row(conn, caller, uid, EDIT)
    parent = _folder_parent(conn, caller, body.parentUid)
    if parent is not None and parent["id"] in store.subtree_ids(conn, row["id"]):
        raise bad_request("a folder cannot be moved into itself or one of its sub-folders")
    if not can_create_in(conn, caller, parent):
        raise forbidden()
    _check_depth(conn, parent, store.subtree_height(conn, row["id"]))
    parent_id = parent["id"] if parent else None
    if store.folder_title_taken(conn, caller.org_id, parent_id, row["title"], row["id"]):
        raise GrafanaError(409, "a folder with the same name already exists in this parent")
    store.set_parent(conn, row["id"], parent_id, now_text(), caller.user_id)
    return folder_dto(conn, caller, store.by_id(conn, caller.org_id, row["id"]))


def list_folders(conn: sqlite3.Connection, caller: Caller, parent_uid: str | None,
                 limit: int, page: int) -> list[dict[str, Any]]:
    parent = _folder_parent(conn, caller, parent_uid)
    if parent is not None and level_of(conn, caller, parent) < VIEW:
        raise forbidden()
    rows = store.root_children(conn, caller.org_id, parent["id"] if parent else None,
                               subject_of(caller), limit, (page - 1) * limit)
    out = []
    for r in rows:
        item: dict[str, Any] = {"id": r["id"], "uid": r["uid"], "title": r["title"]}
        if parent is not None:
            item["parentUid"] = parent["uid"]
        out.append(item)
    return out
