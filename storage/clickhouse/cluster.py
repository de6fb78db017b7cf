"""The schema and the statements that change data on a ClickHouse cluster
(`storage.clickhouse.cluster`, docs/scale-out.md).

With a cluster name, each table of the migrations becomes two, created `ON CLUSTER`:
- `<table>_local`, the data, in the `Replicated` form of its engine (Keeper keeps the
  replicas of a shard in step; `{shard}` and `{replica}` are each server's macros);
- `<table>`, a `Distributed` table over the locals, which every read and insert names as
  on one server. Rows go to a shard by their stream (`cityHash64(tenant, stream id)`), so a
  stream's lines, postings and rollups share a shard: the Replacing and Summing engines
  fold repeats and sums within a shard only.

A materialized view reads the local table it watches and writes the local table of its
target: a shard's inserts feed that shard's rollups. A column added later goes to the local
table and to its Distributed one (only the local table orders by it). Lightweight `DELETE`
and `OPTIMIZE` do not work through a `Distributed` table: they name the local tables `ON
CLUSTER`.

Without a cluster name every statement is returned as it is (one server, or ClickHouse
Cloud, which replicates plain tables itself). Nothing here can run Keeper or a second
server: the statements are checked by ClickHouse's own parser (`formatQuery`, in the tests),
not run against a cluster; docs/scale-out.md says how a user verifies one.
"""

from __future__ import annotations

import re

LOCAL = "_local"
# how rows are spread over the shards: by stream, for every table that holds streams' rows
SHARDING = {
    "streams": "cityHash64(tenant, id)",
    "stream_labels": "cityHash64(tenant, stream_id)",
    "entries": "cityHash64(tenant, stream_id)",
    "rollups": "cityHash64(tenant, stream_id)",
}
# where Keeper keeps a table's replicas: ClickHouse fills in the macros on each server
REPLICA_PATH = "/clickhouse/tables/{shard}/{database}/{table}"

_CREATE_TABLE = re.compile(r"^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+) \(")
_ENGINE = re.compile(r"\bENGINE = (\w*MergeTree)(?:\((.*)\))?[ \t]*$", re.M)
_VIEW = re.compile(r"^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)\.(\w+) TO (\w+)\.(\w+) AS")
_ALTER = re.compile(r"^ALTER TABLE (\w+)\.(\w+)\s+(ADD COLUMN IF NOT EXISTS\s.*)$", re.S)


def statements(sql: str, cluster: str) -> list[str]:
    """What to run for one migration statement (its `{db}` already replaced)."""
    if not cluster:
        return [sql]
    on = f" ON CLUSTER {cluster}"
    table = _CREATE_TABLE.match(sql)
    if table:
        db, name = table.groups()
        local, engines = _ENGINE.subn(
            lambda m: "ENGINE = " + replicated(m.group(1), m.group(2)),
            sql.replace(f"{db}.{name} (", f"{db}.{name}{LOCAL}{on} (", 1), 1)
        if not engines:
            raise ValueError(f"no MergeTree engine to replicate in: {sql[:80]}")
        return [local,
                f"CREATE TABLE IF NOT EXISTS {db}.{name}{on} AS {db}.{name}{LOCAL} "
                f"ENGINE = Distributed({cluster}, {db}, {name}{LOCAL}, {SHARDING[name]})"]
    view = _VIEW.match(sql)
    if view:
        db, name, target_db, target = view.groups()
        head = (f"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.{name}{on} "
                f"TO {target_db}.{target}{LOCAL} AS")
        body = sql[view.end():]
        # the view watches the local table of what it selects from
        body = re.sub(rf"\bFROM {db}\.(\w+)", rf"FROM {db}.\1{LOCAL}", body)
        return [head + body]
    alter = _ALTER.match(sql)
    if alter:
        # the local tables hold the column (and order by it), the Distributed one passes
        # it on
        db, name, change = alter.groups()
        added = re.sub(r",\s*MODIFY ORDER BY \(.*\)\s*$", "", change, flags=re.S)
        return [f"ALTER TABLE {db}.{name}{LOCAL}{on} {change}",
                f"ALTER TABLE {db}.{name}{on} {added}"]
    if sql.startswith("DROP VIEW IF EXISTS "):
        return [sql + on]
    if sql.startswith("INSERT INTO"):
        return [sql]  # through the Distributed tables: every shard's rows, to their shards
    raise ValueError(f"no cluster form for the migration statement: {sql[:80]}")


def replicated(engine: str, args: str | None) -> str:
    """`SummingMergeTree((lines, bytes))` as `ReplicatedSummingMergeTree('path', '{replica}',
    (lines, bytes))`."""
    extra = f", {args}" if args else ""
    return f"Replicated{engine}('{REPLICA_PATH}', '{{replica}}'{extra})"


def schema_version_table(db: str, cluster: str) -> str:
    """The table of applied migrations. On a cluster every server holds all of it (one
    Keeper path for every shard's replicas), so a node asking any server sees the same."""
    if not cluster:
        return (f"CREATE TABLE IF NOT EXISTS {db}.schema_version "
                "(version UInt32, name String, applied DateTime DEFAULT now()) "
                "ENGINE = ReplacingMergeTree ORDER BY version")
    return (f"CREATE TABLE IF NOT EXISTS {db}.schema_version ON CLUSTER {cluster} "
            "(version UInt32, name String, applied DateTime DEFAULT now()) "
            "ENGINE = ReplicatedReplacingMergeTree("
            "'/clickhouse/tables/all/{database}/schema_version', '{replica}') "
            "ORDER BY version")


def changing(db: str, table: str, cluster: str) -> str:
    """The table a `DELETE` or `OPTIMIZE` names, with its `ON CLUSTER`."""
    return f"{db}.{table}{LOCAL} ON CLUSTER {cluster}" if cluster else f"{db}.{table}"
