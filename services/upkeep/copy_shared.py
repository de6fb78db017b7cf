"""The shared state of a data directory (rules and alerts, delete requests, Grafana's objects)
into `storage.shared.url`'s PostgreSQL: the second half of `logstore copy-to-clickhouse` for
a user moving a single node into a cluster (docs/scale-out.md).

Table by table, rows keep their ids (dashboards, users and permissions refer to each other by
them). A row whose key or unique value is already there is left as it is, so the command can
run again after an interruption; identity sequences are then moved past the copied ids.
Patterns are not copied: their stream ids are SQLite's, and the cluster's miner finds the
templates again in the copied lines.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable

from storage import rules

# parents before the rows that name them; each exists in both schemas with the same columns
TABLES = ("gf_org", "gf_user", "gf_org_user", "gf_team", "gf_team_member", "gf_token",
          "gf_dashboard", "gf_dashboard_tag", "gf_star", "gf_permission", "gf_session",
          "rule_groups", "alert_states", "remote_write_buffer", "delete_requests",
          "cache_generation")
# tables whose id PostgreSQL hands out from a sequence
SEQUENCED = ("gf_user", "gf_team", "gf_token", "gf_dashboard", "gf_permission", "gf_session",
             "remote_write_buffer")
BATCH_ROWS = 1000


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _copy_table(conn: sqlite3.Connection, state: Any, table: str) -> tuple[int, int]:
    """(rows in SQLite, rows in PostgreSQL afterwards)."""
    columns = _columns(conn, table)
    insert = (f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
              f"({', '.join('?' for _ in columns)}) ON CONFLICT DO NOTHING")
    cur = conn.execute(f"SELECT {', '.join(columns)} FROM {table}")
    while True:
        rows = cur.fetchmany(BATCH_ROWS)
        if not rows:
            break
        state.write_sync(lambda pg, rows=rows: pg.executemany(insert, rows))
    if table in SEQUENCED:
        state.write_sync(lambda pg: pg.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
            f"GREATEST((SELECT max(id) FROM {table}), 1))"))
    want = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    got = state.read_sync(lambda pg: pg.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    return want, got


def copy_shared(conn: sqlite3.Connection, state: Any, say: Callable[[str], None]) -> bool:
    """Every table; False when PostgreSQL ends with fewer rows than SQLite has in one."""
    ok = True
    for table in TABLES:
        want, got = _copy_table(conn, state, table)
        if table == "remote_write_buffer":  # its counts follow the rows it now holds
            state.write_sync(rules.recount_buffered)
        say(f"{table}: {want:,} rows in SQLite, {got:,} in PostgreSQL")
        if got < want:
            say(f"logstore: {table}: {want - got:,} rows of SQLite are not in PostgreSQL "
                "(rows there already hold their ids or unique names)")
            ok = False
    return ok
