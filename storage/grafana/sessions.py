"""Grafana-side login sessions in SQLite (migrations/0008_sessions.sql)."""

from __future__ import annotations

import sqlite3
from typing import Any


def insert(conn: sqlite3.Connection, user_id: int, token_hash: str, now: int) -> None:
    conn.execute("INSERT INTO gf_session (user_id, token_hash, created_at, seen_at) "
                 "VALUES (?, ?, ?, ?)", (user_id, token_hash, now, now))


def by_token(conn: sqlite3.Connection, token_hash: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT id, user_id, created_at, seen_at FROM gf_session "
                       "WHERE token_hash = ?", (token_hash,)).fetchone()
    if row is None:
        return None
    return dict(zip(("id", "user_id", "created_at", "seen_at"), row))


def touch(conn: sqlite3.Connection, session_id: int, now: int) -> None:
    conn.execute("UPDATE gf_session SET seen_at = ? WHERE id = ?", (now, session_id))


def delete(conn: sqlite3.Connection, token_hash: str) -> None:
    conn.execute("DELETE FROM gf_session WHERE token_hash = ?", (token_hash,))


def delete_expired(conn: sqlite3.Connection, created_before: int, seen_before: int) -> None:
    conn.execute("DELETE FROM gf_session WHERE created_at < ? OR seen_at < ?",
                 (created_before, seen_before))
