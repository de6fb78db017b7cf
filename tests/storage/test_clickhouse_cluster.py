"""The schema on a ClickHouse cluster (storage/clickhouse/cluster.py): every migration
statement has a form for `storage.clickhouse.cluster` that ClickHouse's own parser accepts
(`formatQuery`, chdb in a process of its own), with replicated local tables, Distributed
tables sharded by stream, views from local table to local table, and DELETE and OPTIMIZE
naming the local tables ON CLUSTER. No Keeper or second server runs here: what a user checks
on a real cluster is in docs/scale-out.md."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from config import ConfigError, config_from_dict
from storage.clickhouse import cluster, ttl
from storage.clickhouse.ttl import TtlPlan
from storage.clickhouse.store import migration_files, migration_statements

CLUSTER = "logs_cluster"
DB = "logstore"

FORMAT = """
import json, sys
import chdb
out = []
for sql in json.load(sys.stdin):
    literal = "'" + sql.replace("\\\\", "\\\\\\\\").replace("'", "\\\\'") + "'"
    try:
        r = chdb.query(f"SELECT formatQuerySingleLine({literal})", "JSONCompact")
        out.append([True, json.loads(str(r))["data"][0][0]])
    except Exception as exc:
        out.append([False, str(exc)])
json.dump(out, sys.stdout)
"""


def _formatted(statements: list[str]) -> list[str]:
    """Each statement as ClickHouse's parser formats it (a failure names the statement)."""
    done = subprocess.run([sys.executable, "-c", FORMAT], input=json.dumps(statements),
                          capture_output=True, text=True, timeout=120, check=True)
    out = []
    for sql, (ok, text) in zip(statements, json.loads(done.stdout)):
        assert ok, f"ClickHouse does not parse {sql!r}: {text}"
        out.append(text)
    return out


def _all_statements() -> list[str]:
    return [text for _, _, sql in migration_files() for text in migration_statements(sql, DB)]


def test_without_a_cluster_every_statement_is_run_as_written():
    for text in _all_statements():
        assert cluster.statements(text, "") == [text]
    assert cluster.changing(DB, "entries", "") == f"{DB}.entries"


def test_every_migration_has_a_cluster_form_clickhouse_parses():
    generated = [s for text in _all_statements() for s in cluster.statements(text, CLUSTER)]
    generated.append(cluster.schema_version_table(DB, CLUSTER))
    formatted = _formatted(generated)
    tables = {m.group(1) for s in formatted
              for m in [re.match(rf"CREATE TABLE IF NOT EXISTS {DB}\.(\w+)_local ON CLUSTER", s)]
              if m}
    assert tables == {"streams", "stream_labels", "entries", "rollups"}
    for name in tables:
        (local,) = [s for s in formatted
                    if s.startswith(f"CREATE TABLE IF NOT EXISTS {DB}.{name}_local ")]
        assert f"ENGINE = Replicated" in local
        assert "'/clickhouse/tables/{shard}/{database}/{table}', '{replica}'" in local
        (shared,) = [s for s in formatted
                     if s.startswith(f"CREATE TABLE IF NOT EXISTS {DB}.{name} ON CLUSTER")]
        assert shared.endswith(f"AS {DB}.{name}_local ENGINE = Distributed({CLUSTER}, {DB}, "
                               f"{name}_local, {cluster.SHARDING[name]})")
    # the rollups keep their summed columns, and the line index stays on the local table
    assert "ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', " \
           "'{replica}', (lines, bytes))" in " ".join(formatted)
    assert [s for s in formatted if "INDEX line_tokens" in s and "entries_local" in s]
    # the view, and the view again with each line's retention rule (0003)
    views = [s for s in formatted if s.startswith("CREATE MATERIALIZED VIEW")]
    assert len(views) == 2
    for view in views:
        assert f"{DB}.rollups_mv ON CLUSTER {CLUSTER} TO {DB}.rollups_local" in view
        assert f"FROM {DB}.entries_local" in view
    assert f"DROP VIEW IF EXISTS {DB}.rollups_mv ON CLUSTER {CLUSTER}" in formatted
    # a column goes to the local table and its Distributed one; only the local table is
    # ordered by it
    added = [s for s in formatted if s.startswith(f"ALTER TABLE {DB}.rollups")]
    assert added == [
        f"ALTER TABLE {DB}.rollups_local ON CLUSTER {CLUSTER} (ADD COLUMN IF NOT EXISTS "
        "`rule` UInt32), (MODIFY ORDER BY (tenant, stream_id, minute, metadata, rule))",
        f"ALTER TABLE {DB}.rollups ON CLUSTER {CLUSTER} (ADD COLUMN IF NOT EXISTS `rule` "
        "UInt32)"]
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/schema_version'" \
        in formatted[-1]


def test_changes_name_the_local_tables_on_the_cluster():
    table = cluster.changing(DB, "entries", CLUSTER)
    # the shapes storage/clickhouse/removal.py sends: a delete request's lines of several
    # streams by seq, a retention period's streams by cutoff, their rows replaced
    statements = [
        f"DELETE FROM {table} WHERE tenant = {{t:String}} AND stream_id IN "
        "{sids:Array(UInt64)} AND seq IN {seqs:Array(UInt64)}",
        f"DELETE FROM {table} WHERE tenant = {{t:String}} AND stream_id IN "
        "{sids:Array(UInt64)} AND ts < {cut:Int64}",
        f"DELETE FROM {cluster.changing(DB, 'streams', CLUSTER)} WHERE id IN "
        "{sids:Array(UInt64)}",
        f"OPTIMIZE TABLE {cluster.changing(DB, 'rollups', CLUSTER)} FINAL",
    ]
    assert _formatted(statements) == [
        f"DELETE FROM {DB}.entries_local ON CLUSTER {CLUSTER} WHERE (tenant = {{t:String}}) "
        "AND (stream_id IN ({sids:Array(UInt64)})) AND (seq IN ({seqs:Array(UInt64)}))",
        f"DELETE FROM {DB}.entries_local ON CLUSTER {CLUSTER} WHERE (tenant = {{t:String}}) "
        "AND (stream_id IN ({sids:Array(UInt64)})) AND (ts < {cut:Int64})",
        f"DELETE FROM {DB}.streams_local ON CLUSTER {CLUSTER} WHERE id IN "
        "({sids:Array(UInt64)})",
        f"OPTIMIZE TABLE {DB}.rollups_local ON CLUSTER {CLUSTER} FINAL"]


def test_the_retention_ttl_names_the_local_tables_on_the_cluster():
    plan = TtlPlan(2 * 86400 * 10**9, {"b": None})
    sql = ttl.statements(DB, CLUSTER, plan, set())
    formatted = _formatted(sql)
    assert [s.split(" (MODIFY ")[0] for s in formatted] == [
        f"ALTER TABLE {DB}.entries_local ON CLUSTER {CLUSTER}",
        f"ALTER TABLE {DB}.rollups_local ON CLUSTER {CLUSTER}",
        f"ALTER TABLE {DB}.entries_local ON CLUSTER {CLUSTER}"]
    assert formatted[0].endswith("+ toIntervalSecond(172800) WHERE tenant NOT IN ('b'))")
    assert formatted[2].endswith(f"(MODIFY COMMENT '{ttl.COMMENT_PREFIX}{plan.digest()}')")
    assert _formatted(ttl.statements(DB, CLUSTER, TtlPlan(None, {}), {"rollups"})) == [
        f"ALTER TABLE {DB}.rollups_local ON CLUSTER {CLUSTER} (REMOVE TTL)",
        f"ALTER TABLE {DB}.entries_local ON CLUSTER {CLUSTER} (MODIFY COMMENT '')"]


def test_a_statement_without_a_cluster_form_is_refused():
    with pytest.raises(ValueError, match="no cluster form"):
        cluster.statements(f"ALTER TABLE {DB}.entries ADD COLUMN x UInt8", CLUSTER)


def test_a_cluster_needs_a_server():
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"storage": {"backend": "clickhouse", "clickhouse": {
            "url": "chdb:///var/lib/logstore/ch", "cluster": CLUSTER}}})
    assert str(caught.value) == ("storage.clickhouse.cluster needs a ClickHouse server "
                                 "(url: http(s)://...): the embedded engine (chdb://) has no "
                                 "cluster")
    cfg = config_from_dict({"storage": {"backend": "clickhouse", "clickhouse": {
        "url": "http://clickhouse:8123", "cluster": CLUSTER}}})
    assert cfg.storage.clickhouse.cluster == CLUSTER


# a ClickHouse that knows a cluster: chdb reads a server config named in its connection
# string (remote_servers only: no Keeper, and no shard it can reach)
SERVER_CONFIG = """<clickhouse><remote_servers><logs_cluster><shard><replica>
<host>127.0.0.1</host><port>9000</port></replica></shard></logs_cluster></remote_servers>
</clickhouse>"""
RUN_STATEMENTS = """
import json, sys
import chdb
conn = chdb.connect(f"{sys.argv[1]}?config-file={sys.argv[2]}")
cur = conn.cursor()
for sql in json.load(sys.stdin):
    cur.execute(sql)
cur.execute("SELECT name, engine, arraySort(groupArray(c.name)) FROM system.tables t "
            "JOIN system.columns c ON c.database = t.database AND c.table = t.name "
            "WHERE t.database = 'logstore' GROUP BY name, engine")
json.dump(cur.fetchall(), sys.stdout)
conn.close()
"""


def _run_knowing_the_cluster(tmp_path, statements: list[str]) -> dict[str, tuple]:
    """Runs the statements in a chdb directory (tmp_path/ch) whose ClickHouse knows the
    cluster; each table of the database then: name -> (engine, its columns' names)."""
    config = tmp_path / "clickhouse.xml"
    config.write_text(SERVER_CONFIG)
    done = subprocess.run([sys.executable, "-c", RUN_STATEMENTS, str(tmp_path / "ch"),
                           str(config)], input=json.dumps(statements), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return {name: (engine, columns) for name, engine, columns in json.loads(done.stdout)}


def test_tables_made_for_a_cluster_are_not_used_as_one_servers(tmp_path):
    """A node whose config names no cluster, over a database whose tables a cluster made,
    does not start: its deletes would name tables that are not there."""
    from tests.conftest import LogstoreServer

    tables = _run_knowing_the_cluster(tmp_path, [
        f"CREATE DATABASE IF NOT EXISTS {DB}",
        f"CREATE TABLE {DB}.entries_local (tenant String, stream_id UInt64) "
        "ENGINE = MergeTree ORDER BY (tenant, stream_id)",
        f"CREATE TABLE {DB}.entries AS {DB}.entries_local "
        f"ENGINE = Distributed({CLUSTER}, {DB}, entries_local, rand())"])
    assert tables["entries"][0] == "Distributed"  # the state the test names
    node = LogstoreServer(tmp_path / "data", {"storage": {
        "backend": "clickhouse", "clickhouse": {"url": f"chdb://{tmp_path / 'ch'}"}}})
    with pytest.raises(RuntimeError, match="server exited"):
        node.start(timeout=60)
    assert ('msg="logstore cannot start: the tables of ClickHouse database logstore were made '
            'for a cluster: set storage.clickhouse.cluster to its name"'
            ) in node.log_path.read_text()


def test_the_distributed_tables_take_the_local_tables_columns(tmp_path):
    """ClickHouse (chdb, with a server config naming the cluster) makes every Distributed
    table `AS` its local table as generated: the codecs, the partitioning and the line
    index of `entries` stay on the local table (an index on a Distributed table is an
    error), and the view goes from local table to local table. Run without `ON CLUSTER`
    and with the engines' plain forms, the two things that need Keeper."""
    run = [f"CREATE DATABASE IF NOT EXISTS {DB}"]
    for text in _all_statements():
        if text.startswith("INSERT"):
            continue  # through a Distributed table: needs the cluster's servers
        generated = cluster.statements(text, CLUSTER)
        if text.startswith("CREATE TABLE"):
            local, distributed = generated
            run.append(re.sub(r"ENGINE = Replicated(\w+)\('[^']*', '\{replica\}'(?:, )?",
                              r"ENGINE = \1(", local.replace(f" ON CLUSTER {CLUSTER}", ""))
                       .replace("MergeTree()", "MergeTree"))
            run.append(distributed.replace(f" ON CLUSTER {CLUSTER}", ""))
        else:
            run += [g.replace(f" ON CLUSTER {CLUSTER}", "") for g in generated]
    tables = _run_knowing_the_cluster(tmp_path, run)
    for name in ("streams", "stream_labels", "entries", "rollups"):
        assert tables[name][0] == "Distributed"
        assert tables[f"{name}_local"][0].endswith("MergeTree")
        assert tables[name][1] == tables[f"{name}_local"][1]
    assert tables["rollups_mv"][0] == "MaterializedView"
