"""`GET /api/search`: parameters parsed the lenient Grafana way, the two-stage ordering,
hits in Grafana 11's shape (spec/search.md §1)."""

from __future__ import annotations

import sqlite3
from urllib.parse import parse_qsl

import msgspec

from services.grafana.common import EDIT, VIEW, Caller, GrafanaError, go_int
from services.grafana.slug import slugify
from storage.grafana import objects as store

MAX_LIMIT = 5000
DEFAULT_LIMIT = 1000
MAX_QUERY = 10_000


class Hit(msgspec.Struct, omit_defaults=True, kw_only=True):
    id: int
    uid: str
    orgId: int
    title: str
    uri: str
    url: str
    slug: str
    type: str
    tags: list[str]
    isStarred: bool
    description: str = ""
    folderId: int = 0
    folderUid: str = ""
    folderTitle: str = ""
    folderUrl: str = ""
    sortMeta: int
    sortMetaName: str = ""
    isDeleted: bool
    permanentlyDeleteDate: str = ""


class Query:
    """Every value of every query-string parameter, in order."""

    def __init__(self, raw: bytes | str):
        text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
        self.values: dict[str, list[str]] = {}
        for key, value in parse_qsl(text, keep_blank_values=True, encoding="utf-8",
                                    errors="replace"):
            self.values.setdefault(key, []).append(value)

    def first(self, name: str) -> str | None:
        vals = self.values.get(name)
        return vals[0] if vals else None

    def all(self, name: str) -> list[str]:
        return self.values.get(name, [])

    def int(self, name: str) -> int:
        return go_int(self.first(name)) or 0


class SearchParams(msgspec.Struct):
    query: str = ""
    tags: list[str] = []
    type: str = ""
    dashboard_uids: list[str] = []
    dashboard_ids: list[int] = []
    folder_uids: list[str] = []
    folder_ids: list[int] = []
    starred: bool = False
    limit: int = DEFAULT_LIMIT
    page: int = 1
    sort: str = ""
    permission: int = VIEW


def parse(q: Query) -> SearchParams:
    """Lenient parsing; raises the 422 and 400s Grafana raises, in Grafana's order."""
    limit = q.int("limit")
    if limit > MAX_LIMIT:
        raise GrafanaError(422, "Limit is above maximum allowed (5000), use page parameter "
                                "to access hits beyond limit")
    page = q.int("page")
    ids = [v for v in (go_int(x) for x in q.all("dashboardIds")) if v is not None]
    fids = [v for v in (go_int(x) for x in q.all("folderIds")) if v is not None]
    uids = q.all("dashboardUIDs") or q.all("dashboardUID")
    fuids = q.all("folderUIDs")
    if (ids and uids) or (fids and fuids):
        raise GrafanaError(400, "search supports UIDs or IDs, not both")
    return SearchParams(
        query=q.first("query") or "", tags=q.all("tag"), type=q.first("type") or "",
        dashboard_uids=uids, dashboard_ids=ids, folder_uids=fuids, folder_ids=fids,
        starred=q.first("starred") == "true", limit=limit if limit >= 1 else DEFAULT_LIMIT,
        page=page if page >= 1 else 1, sort=q.first("sort") or "",
        permission=EDIT if q.first("permission") == "Edit" else VIEW)


def subject_of(caller: Caller) -> store.Subject:
    return store.Subject(org_id=caller.org_id, user_id=caller.user_id, team_ids=caller.team_ids,
                         role=caller.role, is_admin=caller.is_org_admin)


def folder_url(uid: str, title: str) -> str:
    return f"/dashboards/f/{uid}/{slugify(title)}"


def run(conn: sqlite3.Connection, caller: Caller, p: SearchParams) -> list[Hit]:
    """The reference algorithm of spec §1.3, with filtering and the window cut in SQL."""
    if p.starred and not store.has_stars(conn, caller.user_id):
        return []
    if (p.page - 1) * p.limit >= 1 << 62:
        return []  # past any possible end (and past what SQLite's OFFSET can take)
    if len(p.query) > MAX_QUERY:
        return []  # longer than any title can be; SQLite refuses such LIKE patterns
    kind = {"dash-folder": "folder", "dash-folder-alerting": "folder",
            "dash-db": "dashboard"}.get(p.type)
    parents: list[int | None] | None = None
    if p.folder_uids:
        parents = []
        for uid in p.folder_uids:
            if uid in ("general", ""):
                parents.append(None)
            else:
                row = store.by_uid(conn, caller.org_id, uid)
                # an unknown uid matches nothing, but keeps the filter in place
                parents.append(row["id"] if row and row["is_folder"] else -1)
    elif p.folder_ids:
        parents = [None if fid == 0 else fid for fid in p.folder_ids]
    use_stars = p.starred and not p.dashboard_uids and not p.dashboard_ids
    f = store.SearchFilter(
        org_id=caller.org_id, query=p.query, tags=p.tags or None, kind=kind,
        uids=p.dashboard_uids or None, ids=p.dashboard_ids or None, parents=parents,
        starred_by=caller.user_id if use_stars else None, descending=p.sort == "alpha-desc",
        limit=p.limit, offset=(p.page - 1) * p.limit)
    rows = store.search(conn, f, subject_of(caller), p.permission)
    if not rows:
        return []
    stars = store.starred_among(conn, caller.user_id, [r["id"] for r in rows])
    if not p.sort:
        rows.sort(key=lambda r: (not r["is_folder"], r["title"].lower(), r["id"]))
    hits = []
    org_id = caller.org_id
    for r in rows:
        row_tags = _decode_tags(r["tags"]) if r["tags"] != "[]" else []
        if not p.sort and len(row_tags) > 1:
            row_tags.sort()  # with `sort`, Grafana leaves the order of tags unspecified
        uid, slug = r["uid"], r["slug"]
        if r["is_folder"]:
            hit = Hit(id=r["id"], uid=uid, orgId=org_id, title=r["title"], uri=f"db/{slug}",
                      url=f"/dashboards/f/{uid}/{slug}", slug="", type="dash-folder",
                      tags=row_tags, isStarred=r["id"] in stars, sortMeta=0, isDeleted=False)
        else:
            hit = Hit(id=r["id"], uid=uid, orgId=org_id, title=r["title"], uri=f"db/{slug}",
                      url=f"/d/{uid}/{slug}", slug="", type="dash-db", tags=row_tags,
                      isStarred=r["id"] in stars, sortMeta=0, isDeleted=False)
        if r["parent_id"] is not None:
            hit.folderId = r["parent_id"]
            hit.folderUid = r["parent_uid"]
            hit.folderTitle = r["parent_title"]
            hit.folderUrl = folder_url(r["parent_uid"], r["parent_title"])
        hits.append(hit)
    if p.starred:
        hits = [h for h in hits if h.isStarred]
    return hits


_decode_tags = msgspec.json.Decoder(list[str]).decode

SORT_OPTIONS = {"sortOptions": [
    {"description": "Sort results in an alphabetically ascending order",
     "displayName": "Alphabetically (A–Z)", "meta": "", "name": "alpha-asc"},
    {"description": "Sort results in an alphabetically descending order",
     "displayName": "Alphabetically (Z–A)", "meta": "", "name": "alpha-desc"},
]}
