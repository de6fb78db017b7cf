"""Rule groups, alert states and the remote-write buffer in SQLite (migrations/0006_rules.sql;
the buffer's counts per client, 0013). Writers run on the writer thread (`Database.write`),
readers on a reader."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Sequence

# (tenant, namespace, name, body)
GroupRow = tuple[str, str, str, str]
# (rule_key, labels json, state, active_at, fired_at, resolved_at, last_sent_at,
#  keep_firing_since, value, annotations json)
StateRow = tuple[str, str, str, int, int, int, int, int, float, str]
# (rule_key, labels json): an alert instance of a group
StateKey = tuple[str, str]


def groups(conn: sqlite3.Connection, tenant: str | None = None,
           namespace: str | None = None) -> list[GroupRow]:
    sql, args = "SELECT tenant, namespace, name, body FROM rule_groups", []
    where = []
    if tenant is not None:
        where.append("tenant = ?")
        args.append(tenant)
    if namespace is not None:
        where.append("namespace = ?")
        args.append(namespace)
    if where:
        sql += " WHERE " + " AND ".join(where)
    return list(conn.execute(sql + " ORDER BY tenant, namespace, name", args))


def put_group(conn: sqlite3.Connection, tenant: str, namespace: str, name: str,
              body: str) -> None:
    conn.execute("INSERT INTO rule_groups (tenant, namespace, name, body, updated_at) "
                 "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, namespace, name) "
                 "DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
                 (tenant, namespace, name, body, time.time()))


def delete_group(conn: sqlite3.Connection, tenant: str, namespace: str, name: str) -> bool:
    gone = conn.execute("DELETE FROM rule_groups WHERE tenant = ? AND namespace = ? "
                        "AND name = ?", (tenant, namespace, name)).rowcount
    conn.execute("DELETE FROM alert_states WHERE tenant = ? AND namespace = ? "
                 "AND group_name = ?", (tenant, namespace, name))
    return gone > 0


def delete_namespace(conn: sqlite3.Connection, tenant: str, namespace: str) -> list[str]:
    """Remove a namespace's groups; returns their names (none: the namespace did not exist)."""
    names = [r[0] for r in conn.execute(
        "SELECT name FROM rule_groups WHERE tenant = ? AND namespace = ?", (tenant, namespace))]
    conn.execute("DELETE FROM rule_groups WHERE tenant = ? AND namespace = ?",
                 (tenant, namespace))
    conn.execute("DELETE FROM alert_states WHERE tenant = ? AND namespace = ?",
                 (tenant, namespace))
    return names


def alert_states(conn: sqlite3.Connection, tenant: str, namespace: str,
                 group: str) -> list[StateRow]:
    return list(conn.execute(
        "SELECT rule_key, labels, state, active_at, fired_at, resolved_at, last_sent_at, "
        "keep_firing_since, value, annotations FROM alert_states "
        "WHERE tenant = ? AND namespace = ? AND group_name = ?", (tenant, namespace, group)))


def group_versions(conn: sqlite3.Connection) -> list[tuple[str, str, str, str, int]]:
    """(tenant, namespace, name, body, states_version) of every group: its alert states
    changed when its states_version did (migrations/0015_alert_state_versions.sql)."""
    return list(conn.execute("SELECT tenant, namespace, name, body, states_version "
                             "FROM rule_groups ORDER BY tenant, namespace, name"))


def alert_states_of(conn: sqlite3.Connection, keys: Sequence[tuple[str, str, str]]
                    ) -> dict[tuple[str, str, str], list[StateRow]]:
    """The alert states of the groups `keys` (tenant, namespace, name), in one read."""
    return {key: alert_states(conn, *key) for key in keys}


def replace_alert_states(conn: sqlite3.Connection, tenant: str, namespace: str, group: str,
                         rows: Sequence[StateRow]) -> None:
    """The group's alert states after an evaluation, in one transaction (writer); none for
    a group deleted meanwhile (on another node, while this evaluation ran)."""
    if not _states_changed(conn, tenant, namespace, group):
        return
    conn.execute("DELETE FROM alert_states WHERE tenant = ? AND namespace = ? "
                 "AND group_name = ?", (tenant, namespace, group))
    conn.executemany(
        "INSERT INTO alert_states (tenant, namespace, group_name, rule_key, labels, state, "
        "active_at, fired_at, resolved_at, last_sent_at, keep_firing_since, value, "
        "annotations) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(tenant, namespace, group, *r) for r in rows])


def update_alert_states(conn: sqlite3.Connection, tenant: str, namespace: str, group: str,
                        changed: Sequence[StateRow], gone: Sequence[StateKey]) -> None:
    """What an evaluation changed of the group's alert states, in one transaction (writer):
    the rows it added or altered, and the (rule_key, labels) of the alerts it ended; none
    for a group deleted meanwhile."""
    if not (changed or gone) or not _states_changed(conn, tenant, namespace, group):
        return
    if gone:
        conn.executemany(
            "DELETE FROM alert_states WHERE tenant = ? AND namespace = ? AND group_name = ? "
            "AND rule_key = ? AND labels = ?", [(tenant, namespace, group, *k) for k in gone])
    if changed:
        conn.executemany(
            "INSERT INTO alert_states (tenant, namespace, group_name, rule_key, labels, state, "
            "active_at, fired_at, resolved_at, last_sent_at, keep_firing_since, value, "
            "annotations) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant, namespace, group_name, rule_key, labels) DO UPDATE SET "
            "state = excluded.state, active_at = excluded.active_at, "
            "fired_at = excluded.fired_at, resolved_at = excluded.resolved_at, "
            "last_sent_at = excluded.last_sent_at, "
            "keep_firing_since = excluded.keep_firing_since, value = excluded.value, "
            "annotations = excluded.annotations",
            [(tenant, namespace, group, *r) for r in changed])


def _states_changed(conn: sqlite3.Connection, tenant: str, namespace: str,
                    group: str) -> bool:
    """Raise the group's states_version, for the nodes that follow them; False when the group
    is gone."""
    return conn.execute("UPDATE rule_groups SET states_version = states_version + 1 "
                        "WHERE tenant = ? AND namespace = ? AND name = ?",
                        (tenant, namespace, group)).rowcount > 0


# -- the remote-write buffer -------------------------------------------------------------------

def buffer_samples(conn: sqlite3.Connection, clients: Sequence[str], tenant: str,
                   samples: Sequence[tuple[dict[str, str], int, float]],
                   max_buffered: int) -> int:
    """Queue samples (labels, ts_ms, value) for each client (writer); beyond `max_buffered`
    per client the oldest are dropped. Returns the samples dropped."""
    dropped = 0
    rows = [(json.dumps(labels, sort_keys=True), ts, value) for labels, ts, value in samples]
    for client in clients:
        conn.executemany("INSERT INTO remote_write_buffer (client, tenant, labels, ts_ms, value) "
                         "VALUES (?, ?, ?, ?, ?)", [(client, tenant, *r) for r in rows])
        over = _count_buffered(conn, client, len(rows)) - max_buffered
        if over > 0:
            gone = conn.execute("DELETE FROM remote_write_buffer WHERE id IN (SELECT id FROM "
                                "remote_write_buffer WHERE client = ? ORDER BY id LIMIT ?)",
                                (client, over)).rowcount
            _count_buffered(conn, client, -gone)
            dropped += gone
    return dropped


def _count_buffered(conn: sqlite3.Connection, client: str, change: int) -> int:
    """The client's buffered samples after `change` more (fewer): kept beside the buffer, as
    counting its rows would read up to max_buffered_samples of them."""
    return conn.execute(
        "INSERT INTO remote_write_buffered (client, samples) VALUES (?, ?) "
        "ON CONFLICT (client) DO UPDATE SET "
        "samples = remote_write_buffered.samples + excluded.samples RETURNING samples",
        (client, change)).fetchone()[0]


def oldest_samples(conn: sqlite3.Connection, client: str,
                   limit: int) -> list[tuple[int, str, str, int, float]]:
    """(id, tenant, labels json, ts_ms, value) of the client's oldest buffered samples."""
    return list(conn.execute(
        "SELECT id, tenant, labels, ts_ms, value FROM remote_write_buffer WHERE client = ? "
        "ORDER BY id LIMIT ?", (client, limit)))


def forget_samples(conn: sqlite3.Connection, client: str, ids: Sequence[int]) -> int:
    """Remove the client's sent (or refused) samples from the buffer (writer)."""
    gone = conn.execute("DELETE FROM remote_write_buffer WHERE client = ? AND id IN "
                        "(SELECT value FROM json_each(?))",
                        (client, json.dumps(list(ids)))).rowcount
    if gone:
        _count_buffered(conn, client, -gone)
    return gone


def recount_buffered(conn: sqlite3.Connection) -> None:
    """Every client's buffered samples counted again (writer): after rows were copied in."""
    conn.execute("DELETE FROM remote_write_buffered")
    conn.execute("INSERT INTO remote_write_buffered (client, samples) "
                 "SELECT client, count(*) FROM remote_write_buffer GROUP BY client")


def buffered(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT client, samples FROM remote_write_buffered "
                             "WHERE samples > 0"))
