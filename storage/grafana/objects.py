"""Folders and dashboards (one table, one id sequence), tags, stars, managed permissions,
and the search query. SQL only: the permission logic that decides *what* to ask lives in
services/grafana/*.py; every value is a bound parameter (lists travel as one JSON array
unpacked by json_each, so no statement text depends on input)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable

OBJECT_COLUMNS = ("id, org_id, uid, title, slug, is_folder, parent_id, data, version, created, "
                  "updated, created_by, updated_by")


def _rows(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _one(cur: sqlite3.Cursor) -> dict[str, Any] | None:
    rows = _rows(cur)
    return rows[0] if rows else None


# -- principals for permission filters -----------------------------------------------------
@dataclass(frozen=True)
class Subject:
    """What managed-permission entries can match: a user id, team ids and a basic role."""
    org_id: int
    user_id: int
    team_ids: tuple[int, ...]
    role: str
    is_admin: bool  # org Admin: every row, no filter


def _granted_sql(subject: Subject, level: int) -> tuple[str, list[Any]]:
    """SELECT of the object ids carrying an entry that matches the subject at >= level."""
    sql = ("SELECT object_id FROM gf_permission WHERE user_id = ? AND org_id = ? AND level >= ? "
           "UNION SELECT object_id FROM gf_permission WHERE role = ? AND org_id = ? "
           "AND level >= ?")
    args: list[Any] = [subject.user_id, subject.org_id, level, subject.role, subject.org_id, level]
    if subject.team_ids:
        sql += (" UNION SELECT object_id FROM gf_permission WHERE team_id IN "
                "(SELECT value FROM json_each(?)) AND org_id = ? AND level >= ?")
        args += [json.dumps(list(subject.team_ids)), subject.org_id, level]
    return sql, args


def visibility_cte(subject: Subject, level: int) -> tuple[str, list[Any]]:
    """`granted` (objects with a direct matching entry) and `eff` (folders reached by a grant on
    themselves or an ancestor), as the WITH clause of a query filtering gf_dashboard d by
    `d.id IN granted OR d.parent_id IN eff`."""
    granted, args = _granted_sql(subject, level)
    sql = (f"WITH RECURSIVE granted(id) AS ({granted}), "
           "eff(id) AS (SELECT f.id FROM gf_dashboard f JOIN granted g ON g.id = f.id "
           "WHERE f.is_folder = 1 "
           "UNION SELECT c.id FROM gf_dashboard c JOIN eff ON c.org_id = ? "
           "AND c.parent_id = eff.id AND c.is_folder = 1) ")
    return sql, args + [subject.org_id]


VISIBLE = "(d.id IN (SELECT id FROM granted) OR d.parent_id IN (SELECT id FROM eff))"


def level_on(conn: sqlite3.Connection, subject: Subject, chain: Iterable[int]) -> int:
    """Highest level an entry on any of the objects in `chain` grants the subject."""
    ids = json.dumps(list(chain))
    args: list[Any] = [ids, subject.user_id, subject.role]
    team = ""
    if subject.team_ids:
        team = " OR team_id IN (SELECT value FROM json_each(?))"
        args.append(json.dumps(list(subject.team_ids)))
    row = conn.execute(
        "SELECT max(level) FROM gf_permission WHERE object_id IN (SELECT value FROM "
        f"json_each(?)) AND (user_id = ? OR role = ?{team})", args).fetchone()
    return row[0] or 0


# -- search --------------------------------------------------------------------------------
@dataclass
class SearchFilter:
    org_id: int
    query: str = ""
    tags: list[str] | None = None
    kind: str | None = None          # "folder" | "dashboard" | None
    uids: list[str] | None = None
    ids: list[int] | None = None
    parents: list[int | None] | None = None   # None in the list = the root
    starred_by: int | None = None    # keep only rows this principal starred
    descending: bool = False
    limit: int = 1000
    offset: int = 0


def search(conn: sqlite3.Connection, f: SearchFilter, subject: Subject,
           level: int) -> list[dict[str, Any]]:
    """One page of matching rows in binary title order (id breaking ties)."""
    prefix, args = ("", [])
    where = ["d.org_id = ?"]
    wargs: list[Any] = [f.org_id]
    if not subject.is_admin:
        prefix, args = visibility_cte(subject, level)
        where.append(VISIBLE)
    if f.kind == "folder":
        where.append("d.is_folder = 1")
    elif f.kind == "dashboard":
        where.append("d.is_folder = 0")
    if f.query:
        where.append("d.title LIKE ?")
        wargs.append(f"%{f.query}%")
    if f.tags:
        where.append("d.id IN (SELECT dashboard_id FROM gf_dashboard_tag WHERE term IN "
                     "(SELECT value FROM json_each(?)) GROUP BY dashboard_id "
                     "HAVING count(*) >= ?)")
        wargs += [json.dumps(f.tags), len(f.tags)]
    if f.uids:
        where.append("d.uid IN (SELECT value FROM json_each(?))")
        wargs.append(json.dumps(f.uids))
    if f.ids:
        where.append("d.id IN (SELECT value FROM json_each(?))")
        wargs.append(json.dumps(f.ids))
    if f.parents:
        ids = [p for p in f.parents if p is not None]
        cond = ["d.parent_id IN (SELECT value FROM json_each(?))"]
        wargs.append(json.dumps(ids))
        if None in f.parents:
            cond.append("d.parent_id IS NULL")
        where.append("(" + " OR ".join(cond) + ")")
    if f.starred_by is not None:
        where.append("d.id IN (SELECT dashboard_id FROM gf_star WHERE user_id = ?)")
        wargs.append(f.starred_by)
    order = "DESC" if f.descending else "ASC"
    # tags and the parent folder are computed only for the rows of the page; tags in binary
    # order (a sorted subquery: SQLite 3.40 has no ORDER BY inside an aggregate), which a
    # search with a sort answers as they are
    sql = (f"{prefix}SELECT d.id, d.uid, d.title, d.slug, d.is_folder, d.parent_id, "
           "(SELECT json_group_array(s.term) FROM (SELECT t.term FROM gf_dashboard_tag t "
           "WHERE t.dashboard_id = d.id ORDER BY t.term) AS s) AS tags, "
           "p.uid AS parent_uid, p.title AS parent_title "
           f"FROM gf_dashboard d LEFT JOIN gf_dashboard p ON p.id = d.parent_id "
           f"WHERE {' AND '.join(where)} "
           f"ORDER BY d.title {order}, d.id {order} LIMIT ? OFFSET ?")
    return _rows(conn.execute(sql, args + wargs + [f.limit, f.offset]))


def starred_among(conn: sqlite3.Connection, user_id: int, ids: list[int]) -> set[int]:
    return {r[0] for r in conn.execute(
        "SELECT dashboard_id FROM gf_star WHERE user_id = ? AND dashboard_id IN "
        "(SELECT value FROM json_each(?))", (user_id, json.dumps(ids)))}


def has_stars(conn: sqlite3.Connection, user_id: int) -> bool:
    return conn.execute("SELECT 1 FROM gf_star WHERE user_id = ? LIMIT 1",
                        (user_id,)).fetchone() is not None


def starred_uids(conn: sqlite3.Connection, user_id: int) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT d.uid FROM gf_star s JOIN gf_dashboard d ON d.id = s.dashboard_id "
        "WHERE s.user_id = ? ORDER BY d.uid", (user_id,))]


def tag_cloud(conn: sqlite3.Connection, org_id: int) -> list[dict[str, Any]]:
    return [{"term": term, "count": count} for term, count in conn.execute(
        "SELECT t.term, count(*) FROM gf_dashboard_tag t JOIN gf_dashboard d "
        "ON d.id = t.dashboard_id WHERE d.org_id = ? GROUP BY t.term ORDER BY t.term",
        (org_id,))]


# -- objects ------------------------------------------------------------------------------
def by_uid(conn: sqlite3.Connection, org_id: int, uid: str) -> dict[str, Any] | None:
    return _one(conn.execute(f"SELECT {OBJECT_COLUMNS} FROM gf_dashboard WHERE org_id = ? "
                             "AND uid = ?", (org_id, uid)))


def by_id(conn: sqlite3.Connection, org_id: int, obj_id: int) -> dict[str, Any] | None:
    return _one(conn.execute(f"SELECT {OBJECT_COLUMNS} FROM gf_dashboard WHERE org_id = ? "
                             "AND id = ?", (org_id, obj_id)))


# the id a recursive query starts from is cast to the column's type: PostgreSQL types the
# recursive term from its first, and a bound integer alone may come as a smaller one
def ancestors(conn: sqlite3.Connection, parent_id: int | None) -> list[dict[str, Any]]:
    """The folder chain from the root down to `parent_id` (inclusive)."""
    if parent_id is None:
        return []
    cur = conn.execute(
        "WITH RECURSIVE up(id, depth) AS (SELECT CAST(? AS BIGINT), 0 "
        "UNION ALL SELECT f.parent_id, up.depth + 1 FROM gf_dashboard f JOIN up "
        "ON f.id = up.id WHERE f.parent_id IS NOT NULL AND up.depth < 64) "
        f"SELECT {', '.join('f.' + c.strip() for c in OBJECT_COLUMNS.split(','))} "
        "FROM up JOIN gf_dashboard f ON f.id = up.id ORDER BY up.depth DESC", (parent_id,))
    return _rows(cur)


def subtree_height(conn: sqlite3.Connection, folder_id: int) -> int:
    """Levels of folders below `folder_id` (0 when it has no sub-folders)."""
    row = conn.execute(
        "WITH RECURSIVE down(id, depth) AS (SELECT CAST(? AS BIGINT), 0 "
        "UNION ALL SELECT c.id, down.depth + 1 FROM gf_dashboard c JOIN down "
        "ON c.parent_id = down.id WHERE c.is_folder = 1 AND down.depth < 64) "
        "SELECT max(depth) FROM down", (folder_id,)).fetchone()
    return row[0] or 0


def subtree_ids(conn: sqlite3.Connection, folder_id: int) -> list[int]:
    """The folder, every folder below it and every dashboard in any of them."""
    return [r[0] for r in conn.execute(
        "WITH RECURSIVE down(id) AS (SELECT CAST(? AS BIGINT) UNION SELECT c.id "
        "FROM gf_dashboard c JOIN down ON c.parent_id = down.id) SELECT id FROM down",
        (folder_id,))]


def folder_title_taken(conn: sqlite3.Connection, org_id: int, parent_id: int | None,
                       title: str, except_id: int | None = None) -> bool:
    # IS [NOT] DISTINCT FROM: the comparison that matches NULL (the root, no exception), in
    # words both engines take (SQLite's `IS ?` is its own)
    row = conn.execute(
        "SELECT 1 FROM gf_dashboard WHERE org_id = ? AND is_folder = 1 "
        "AND parent_id IS NOT DISTINCT FROM ? AND title = ? AND id IS DISTINCT FROM ? LIMIT 1",
        (org_id, parent_id, title, except_id)).fetchone()
    return row is not None


def insert_object(conn: sqlite3.Connection, *, org_id: int, uid: str, title: str, slug: str,
                  is_folder: bool, parent_id: int | None, data: dict[str, Any], version: int,
                  now: str, user_id: int) -> int:
    return conn.execute(
        "INSERT INTO gf_dashboard (org_id, uid, title, slug, is_folder, parent_id, data, version, "
        "created, updated, created_by, updated_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "RETURNING id",
        (org_id, uid, title, slug, int(is_folder), parent_id, json.dumps(data), version, now, now,
         user_id, user_id)).fetchone()[0]


def update_object(conn: sqlite3.Connection, obj_id: int, *, uid: str, title: str, slug: str,
                  parent_id: int | None, data: dict[str, Any], version: int, now: str,
                  user_id: int) -> None:
    conn.execute("UPDATE gf_dashboard SET uid = ?, title = ?, slug = ?, parent_id = ?, data = ?, "
                 "version = ?, updated = ?, updated_by = ? WHERE id = ?",
                 (uid, title, slug, parent_id, json.dumps(data), version, now, user_id, obj_id))


def set_parent(conn: sqlite3.Connection, obj_id: int, parent_id: int | None, now: str,
               user_id: int) -> None:
    conn.execute("UPDATE gf_dashboard SET parent_id = ?, version = version + 1, updated = ?, "
                 "updated_by = ? WHERE id = ?", (parent_id, now, user_id, obj_id))


def set_tags(conn: sqlite3.Connection, dash_id: int, tags: Iterable[str]) -> None:
    conn.execute("DELETE FROM gf_dashboard_tag WHERE dashboard_id = ?", (dash_id,))
    conn.executemany("INSERT INTO gf_dashboard_tag (dashboard_id, term) VALUES (?, ?) "
                     "ON CONFLICT DO NOTHING", [(dash_id, t) for t in tags])


def delete_objects(conn: sqlite3.Connection, ids: list[int]) -> None:
    """Rows and everything attached to them: tags, stars, permissions."""
    arg = (json.dumps(ids),)
    for table, column in (("gf_dashboard_tag", "dashboard_id"), ("gf_star", "dashboard_id"),
                          ("gf_permission", "object_id"), ("gf_dashboard", "id")):
        conn.execute(f"DELETE FROM {table} WHERE {column} IN "  # table names are constants
                     "(SELECT value FROM json_each(?))", arg)


def user_logins(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, str]:
    return {r[0]: r[1] for r in conn.execute(
        "SELECT id, login FROM gf_user WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(set(ids))),))}


def root_children(conn: sqlite3.Connection, org_id: int, parent_id: int | None,
                  subject: Subject, limit: int, offset: int) -> list[dict[str, Any]]:
    """Folders directly under `parent_id` (None: the root) visible to the subject, by title."""
    prefix, args = ("", [])
    where = "d.org_id = ? AND d.is_folder = 1 AND d.parent_id IS NOT DISTINCT FROM ?"
    if not subject.is_admin:
        prefix, args = visibility_cte(subject, 1)
        where += " AND " + VISIBLE
    return _rows(conn.execute(
        f"{prefix}SELECT d.id, d.uid, d.title, d.parent_id FROM gf_dashboard d WHERE {where} "
        "ORDER BY d.title, d.id LIMIT ? OFFSET ?", args + [org_id, parent_id, limit, offset]))


# -- stars ----------------------------------------------------------------------------------
def star(conn: sqlite3.Connection, user_id: int, dash_id: int) -> None:
    conn.execute("INSERT INTO gf_star (user_id, dashboard_id) VALUES (?, ?) "
                 "ON CONFLICT DO NOTHING", (user_id, dash_id))


def unstar(conn: sqlite3.Connection, user_id: int, dash_id: int) -> None:
    conn.execute("DELETE FROM gf_star WHERE user_id = ? AND dashboard_id = ?", (user_id, dash_id))


# -- managed permissions ----------------------------------------------------------------------
def permissions_on(conn: sqlite3.Connection, obj_ids: list[int]) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT p.id, p.object_id, p.user_id, p.team_id, p.role, p.level, p.created, p.updated, "
        "u.uid AS user_uid, u.login AS user_login, u.email AS user_email, t.uid AS team_uid, "
        "t.name AS team_name, t.email AS team_email FROM gf_permission p "
        "LEFT JOIN gf_user u ON u.id = p.user_id LEFT JOIN gf_team t ON t.id = p.team_id "
        "WHERE p.object_id IN (SELECT value FROM json_each(?)) ORDER BY p.id",
        (json.dumps(obj_ids),))
    return _rows(cur)


def replace_permissions(conn: sqlite3.Connection, org_id: int, obj_id: int,
                        items: list[tuple[int | None, int | None, str | None, int]],
                        now: str) -> None:
    conn.execute("DELETE FROM gf_permission WHERE object_id = ?", (obj_id,))
    add_permissions(conn, org_id, obj_id, items, now)


def add_permissions(conn: sqlite3.Connection, org_id: int, obj_id: int,
                    items: list[tuple[int | None, int | None, str | None, int]],
                    now: str) -> None:
    conn.executemany(
        "INSERT INTO gf_permission (org_id, object_id, user_id, team_id, role, level, created, "
        "updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(org_id, obj_id, u, t, r, lvl, now, now) for u, t, r, lvl in items])


def ping(conn: sqlite3.Connection) -> None:
    conn.execute("SELECT count(*) FROM gf_org").fetchone()
