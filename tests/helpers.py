"""Small helpers shared by tests: push bodies and reading back what was stored."""

from __future__ import annotations

import json
import sqlite3
import time

PUSH = "/logstore/api/v1/push"
JSON_HEADERS = {"Content-Type": "application/json"}


def now_ns() -> int:
    return time.time_ns()


def push_body(stream: dict, values: list) -> bytes:
    return json.dumps({"streams": [{"stream": stream, "values": values}]}).encode()


def stored(db_path: str) -> list[tuple[str, int, str, dict | None]]:
    """(tenant, ts, line, metadata) of every stored entry, read from the SQLite file."""
    conn = sqlite3.connect(db_path)
    try:
        rows = conn.execute(
            "SELECT s.tenant, s.labels, e.ts, e.line, e.metadata FROM entries e "
            "JOIN streams s ON s.id = e.stream_id ORDER BY e.ts, e.id").fetchall()
    finally:
        conn.close()
    return [(t, labels, ts, line, json.loads(md) if md else None)
            for t, labels, ts, line, md in rows]


def db_path(client) -> str:
    return client.app.state.ctx.db.path
