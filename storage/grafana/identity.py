"""Grafana-side identity in SQLite: orgs, users, service accounts, teams, tokens."""

from __future__ import annotations

import sqlite3
from typing import Any

USER_COLUMNS = ("id, uid, login, email, name, password_hash, is_admin, is_service_account, "
                "is_disabled, org_id, created, updated")


def _row(cur: sqlite3.Cursor, row: tuple | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {d[0]: v for d, v in zip(cur.description, row)}


def _rows(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def ensure_org(conn: sqlite3.Connection, org_id: int, name: str, now: str) -> None:
    conn.execute("INSERT INTO gf_org (id, name, created, updated) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT DO NOTHING", (org_id, name, now, now))


def count_users(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM gf_user").fetchone()[0]


def user_by_id(conn: sqlite3.Connection, user_id: int) -> dict[str, Any] | None:
    cur = conn.execute(f"SELECT {USER_COLUMNS} FROM gf_user WHERE id = ?", (user_id,))
    return _row(cur, cur.fetchone())


def user_by_login_or_email(conn: sqlite3.Connection, login: str) -> dict[str, Any] | None:
    cur = conn.execute(f"SELECT {USER_COLUMNS} FROM gf_user WHERE login = ? "
                       "AND is_service_account = 0", (login,))
    row = cur.fetchone()
    if row is None and login:
        cur = conn.execute(f"SELECT {USER_COLUMNS} FROM gf_user WHERE email = ? "
                           "AND is_service_account = 0", (login,))
        row = cur.fetchone()
    return _row(cur, row)


def insert_user(conn: sqlite3.Connection, *, uid: str, login: str, email: str, name: str,
                password_hash: str, is_admin: bool, is_service_account: bool, org_id: int,
                role: str, now: str, is_disabled: bool = False) -> int:
    cur = conn.execute(
        "INSERT INTO gf_user (uid, login, email, name, password_hash, is_admin, "
        "is_service_account, is_disabled, org_id, created, updated) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (uid, login, email, name, password_hash, int(is_admin), int(is_service_account),
         int(is_disabled), org_id, now, now))
    user_id = cur.fetchone()[0]
    conn.execute("INSERT INTO gf_org_user (org_id, user_id, role, created, updated) "
                 "VALUES (?, ?, ?, ?, ?)", (org_id, user_id, role, now, now))
    return user_id


def login_or_email_taken(conn: sqlite3.Connection, login: str, email: str) -> bool:
    row = conn.execute("SELECT 1 FROM gf_user WHERE login = ? OR (email <> '' AND email = ?) "
                       "LIMIT 1", (login, email)).fetchone()
    return row is not None


def set_password(conn: sqlite3.Connection, user_id: int, password_hash: str, now: str) -> int:
    # a new password ends every session the old one started (Grafana revokes them too)
    conn.execute("DELETE FROM gf_session WHERE user_id = ?", (user_id,))
    return conn.execute("UPDATE gf_user SET password_hash = ?, updated = ? WHERE id = ? "
                        "AND is_service_account = 0", (password_hash, now, user_id)).rowcount


def org_role(conn: sqlite3.Connection, org_id: int, user_id: int) -> str | None:
    row = conn.execute("SELECT role FROM gf_org_user WHERE org_id = ? AND user_id = ?",
                       (org_id, user_id)).fetchone()
    return row[0] if row else None


def team_ids_of(conn: sqlite3.Connection, user_id: int) -> tuple[int, ...]:
    return tuple(r[0] for r in conn.execute(
        "SELECT team_id FROM gf_team_member WHERE user_id = ?", (user_id,)))


def org_users(conn: sqlite3.Connection, org_id: int) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT u.id, u.uid, u.login, u.email, u.name, u.updated, ou.role FROM gf_org_user ou "
        "JOIN gf_user u ON u.id = ou.user_id WHERE ou.org_id = ? AND u.is_service_account = 0 "
        "ORDER BY u.login", (org_id,))
    return _rows(cur)


def add_org_user(conn: sqlite3.Connection, org_id: int, user_id: int, role: str,
                 now: str) -> bool:
    cur = conn.execute("INSERT INTO gf_org_user (org_id, user_id, role, created, updated) "
                       "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                       (org_id, user_id, role, now, now))
    return cur.rowcount == 1


def set_org_role(conn: sqlite3.Connection, org_id: int, user_id: int, role: str,
                 now: str) -> int:
    return conn.execute("UPDATE gf_org_user SET role = ?, updated = ? WHERE org_id = ? "
                        "AND user_id = ?", (role, now, org_id, user_id)).rowcount


# -- teams -----------------------------------------------------------------------------------
def insert_team(conn: sqlite3.Connection, org_id: int, uid: str, name: str, email: str,
                now: str) -> int:
    return conn.execute("INSERT INTO gf_team (uid, org_id, name, email, created, updated) "
                        "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                        (uid, org_id, name, email, now, now)).fetchone()[0]


def team_by_id(conn: sqlite3.Connection, org_id: int, team_id: int) -> dict[str, Any] | None:
    cur = conn.execute("SELECT id, uid, org_id, name, email FROM gf_team WHERE org_id = ? "
                       "AND id = ?", (org_id, team_id))
    return _row(cur, cur.fetchone())


def team_name_taken(conn: sqlite3.Connection, org_id: int, name: str) -> bool:
    return conn.execute("SELECT 1 FROM gf_team WHERE org_id = ? AND name = ?",
                        (org_id, name)).fetchone() is not None


def search_teams(conn: sqlite3.Connection, org_id: int, query: str, limit: int,
                 offset: int) -> tuple[int, list[dict[str, Any]]]:
    pattern = f"%{query}%"
    total = conn.execute("SELECT count(*) FROM gf_team WHERE org_id = ? AND name LIKE ?",
                         (org_id, pattern)).fetchone()[0]
    cur = conn.execute(
        "SELECT t.id, t.uid, t.org_id, t.name, t.email, "
        "(SELECT count(*) FROM gf_team_member m WHERE m.team_id = t.id) AS member_count "
        "FROM gf_team t WHERE t.org_id = ? AND t.name LIKE ? ORDER BY t.name, t.id "
        "LIMIT ? OFFSET ?", (org_id, pattern, limit, offset))
    return total, _rows(cur)


def add_team_member(conn: sqlite3.Connection, team_id: int, user_id: int) -> bool:
    return conn.execute("INSERT INTO gf_team_member (team_id, user_id) VALUES (?, ?) "
                        "ON CONFLICT DO NOTHING", (team_id, user_id)).rowcount == 1


def remove_team_member(conn: sqlite3.Connection, team_id: int, user_id: int) -> int:
    return conn.execute("DELETE FROM gf_team_member WHERE team_id = ? AND user_id = ?",
                        (team_id, user_id)).rowcount


# -- service accounts and tokens ------------------------------------------------------------
SA_QUERY = ("SELECT u.id, u.uid, u.login, u.name, u.org_id, u.is_disabled, u.created, "
            "u.updated, ou.role, (SELECT count(*) FROM gf_token t WHERE "
            "t.service_account_id = u.id) AS tokens FROM gf_user u JOIN gf_org_user ou "
            "ON ou.user_id = u.id AND ou.org_id = u.org_id WHERE u.is_service_account = 1")


def service_account(conn: sqlite3.Connection, org_id: int, sa_id: int) -> dict[str, Any] | None:
    cur = conn.execute(SA_QUERY + " AND u.org_id = ? AND u.id = ?", (org_id, sa_id))
    return _row(cur, cur.fetchone())


def search_service_accounts(conn: sqlite3.Connection, org_id: int, query: str, limit: int,
                            offset: int) -> tuple[int, list[dict[str, Any]]]:
    pattern = f"%{query}%"
    total = conn.execute("SELECT count(*) FROM gf_user WHERE is_service_account = 1 AND "
                         "org_id = ? AND (name LIKE ? OR login LIKE ?)",
                         (org_id, pattern, pattern)).fetchone()[0]
    cur = conn.execute(SA_QUERY + " AND u.org_id = ? AND (u.name LIKE ? OR u.login LIKE ?) "
                       "ORDER BY u.name, u.id LIMIT ? OFFSET ?",
                       (org_id, pattern, pattern, limit, offset))
    return total, _rows(cur)


def update_service_account(conn: sqlite3.Connection, sa_id: int, name: str | None,
                           is_disabled: bool | None, now: str) -> None:
    if name is not None:
        conn.execute("UPDATE gf_user SET name = ?, updated = ? WHERE id = ?", (name, now, sa_id))
    if is_disabled is not None:
        conn.execute("UPDATE gf_user SET is_disabled = ?, updated = ? WHERE id = ?",
                     (int(is_disabled), now, sa_id))


def delete_principal(conn: sqlite3.Connection, user_id: int) -> None:
    """A user or service account and everything that names it."""
    for sql in ("DELETE FROM gf_token WHERE service_account_id = ?",
                "DELETE FROM gf_org_user WHERE user_id = ?",
                "DELETE FROM gf_team_member WHERE user_id = ?",
                "DELETE FROM gf_star WHERE user_id = ?",
                "DELETE FROM gf_permission WHERE user_id = ?",
                "DELETE FROM gf_user WHERE id = ?"):
        conn.execute(sql, (user_id,))


def insert_token(conn: sqlite3.Connection, org_id: int, sa_id: int, name: str, digest: str,
                 now: str, expires: int | None) -> int:
    return conn.execute("INSERT INTO gf_token (org_id, service_account_id, name, hash, created, "
                        "expires) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                        (org_id, sa_id, name, digest, now, expires)).fetchone()[0]


def token_name_taken(conn: sqlite3.Connection, sa_id: int, name: str) -> bool:
    return conn.execute("SELECT 1 FROM gf_token WHERE service_account_id = ? AND name = ?",
                        (sa_id, name)).fetchone() is not None


def tokens_of(conn: sqlite3.Connection, sa_id: int) -> list[dict[str, Any]]:
    cur = conn.execute("SELECT id, name, created, expires, last_used_at FROM gf_token "
                       "WHERE service_account_id = ? ORDER BY name, id", (sa_id,))
    return _rows(cur)


def delete_token(conn: sqlite3.Connection, sa_id: int, token_id: int) -> int:
    return conn.execute("DELETE FROM gf_token WHERE service_account_id = ? AND id = ?",
                        (sa_id, token_id)).rowcount


def token_by_hash(conn: sqlite3.Connection, digest: str) -> dict[str, Any] | None:
    cur = conn.execute(
        "SELECT t.id, t.org_id, t.expires, u.id AS user_id, u.login, u.is_disabled "
        "FROM gf_token t JOIN gf_user u ON u.id = t.service_account_id WHERE t.hash = ?",
        (digest,))
    return _row(cur, cur.fetchone())
