"""The runtime configuration text the nodes of a cluster share (`runtime_config` table of
the shared state on PostgreSQL; services/runtime/overrides.py says when it is written and
read). One row: the text and a version that grows by one whenever the text changes."""

from __future__ import annotations

from typing import Any

_PUBLISH = ("INSERT INTO runtime_config (id, version, text, node, updated) "
            "VALUES (1, 1, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET version = runtime_config.version + 1, "
            "text = excluded.text, node = excluded.node, updated = excluded.updated "
            "WHERE runtime_config.text <> excluded.text "
            "RETURNING version")


def published(conn: Any) -> tuple[int, str] | None:
    """(version, text) of the shared runtime configuration; None before any node wrote one."""
    row = conn.execute("SELECT version, text FROM runtime_config WHERE id = 1").fetchone()
    return (int(row[0]), row[1]) if row else None


def publish(conn: Any, text: str, node: str, now_ns: int) -> int:
    """Make `text` the shared runtime configuration; its version (unchanged when the text
    already was this one)."""
    row = conn.execute(_PUBLISH, (text, node, now_ns)).fetchone()
    if row is not None:
        return int(row[0])
    return published(conn)[0]
