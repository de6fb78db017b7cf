"""Nodes of a cluster share `runtime_config.file`'s overrides through the shared state
(services/runtime/overrides.py): a change to one node's file reaches a node that has no file,
a file that does not parse reaches nobody, and each node enforces what it applied. Two real
`logstore serve` processes on one real PostgreSQL."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import psycopg
import yaml

from tests.conftest import LogstoreServer
from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body, until

TENANT = "team"
QUERY_RANGE = "/logstore/api/v1/query_range"


def _node(tmp_path: Path, name: str, shared: str, runtime: Path | None) -> LogstoreServer:
    (tmp_path / name).mkdir()
    return LogstoreServer(tmp_path / name / "data", {
        "auth_enabled": True,
        "storage": {"backend": "clickhouse",
                    "clickhouse": {"url": f"chdb://{tmp_path / name / 'ch'}"},
                    "shared": {"url": shared}},
        "runtime_config": {"period": "200ms", **({"file": str(runtime)} if runtime else {})}})


def _write(runtime: Path, data: dict) -> None:
    """Replace the file at once, as a ConfigMap or an editor's save does: a node reading it
    while it is written must not see half of it."""
    part = runtime.with_suffix(".part")
    part.write_text(yaml.safe_dump(data))
    os.replace(part, runtime)


def _overrides(runtime: Path, limit: int) -> None:
    _write(runtime, {"overrides": {TENANT: {"max_entries_limit_per_query": limit}}})


def _applied(node: LogstoreServer) -> int | None:
    """The tenant's entry limit as the node's GET /runtime_config shows it."""
    r = httpx.get(node.url + "/runtime_config", timeout=10)
    assert r.status_code == 200, r.text
    shown = (yaml.safe_load(r.text) or {}).get("overrides") or {}
    return (shown.get(TENANT) or {}).get("max_entries_limit_per_query")




def _query(node: LogstoreServer, limit: int) -> httpx.Response:
    return httpx.get(node.url + QUERY_RANGE, headers={"X-Scope-OrgID": TENANT}, timeout=10,
                     params={"query": '{app="a"}', "limit": str(limit),
                             "start": str(now_ns() - 3600 * 10**9), "end": str(now_ns())})


def _shared_row(url: str) -> tuple[int, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT version, text FROM runtime_config").fetchone()


def _reload_ok(node: LogstoreServer) -> float:
    text = httpx.get(node.url + "/metrics", timeout=10).text
    return float(re.search(r"^logstore_runtime_config_last_reload_successful (\S+)$",
                           text, re.M).group(1))


def test_one_nodes_file_reaches_a_node_without_one(tmp_path, postgres_url):
    runtime = tmp_path / "runtime.yaml"
    _overrides(runtime, 5)
    a = _node(tmp_path, "a", postgres_url, runtime).start(timeout=60)
    b = None
    try:
        b = _node(tmp_path, "b", postgres_url, None).start(timeout=60)
        # the states the test names: one shared database, a file for a and none for b
        configs = [yaml.safe_load(n.config_path.read_text()) for n in (a, b)]
        assert configs[0]["storage"]["shared"] == configs[1]["storage"]["shared"]
        assert "file" not in configs[1]["runtime_config"]
        r = httpx.post(b.url + PUSH, headers={**JSON_HEADERS, "X-Scope-OrgID": TENANT},
                       timeout=30, content=push_body({"app": "a"}, [[str(now_ns()), "x"]]))
        assert r.status_code == 204, r.text

        # b started with the cluster's overrides, and enforces them
        assert _applied(a) == _applied(b) == 5
        r = _query(b, 6)
        assert r.status_code == 400
        assert r.text.strip() == ("max entries limit per query exceeded, limit > "
                                  "max_entries_limit_per_query (6 > 5)")
        assert _query(b, 5).status_code == 200
        version, _ = _shared_row(postgres_url)

        # a's file changes: b follows within a few periods
        _overrides(runtime, 7)
        until(lambda: _applied(b) == 7, "b applies a's new file")
        assert _applied(a) == 7
        assert _shared_row(postgres_url)[0] == version + 1
        assert _query(b, 7).status_code == 200
        assert _query(b, 8).status_code == 400

        # a file that does not parse is kept out on a, and never reaches b
        _write(runtime, {"overrides": {TENANT: {"max_entries_limit_per_quer": 3}}})
        until(lambda: _reload_ok(a) == 0.0, "a refuses its bad file")
        assert _shared_row(postgres_url)[0] == version + 1
        assert _applied(a) == _applied(b) == 7
        assert _reload_ok(b) == 1.0
    finally:
        for node in (a, b):
            if node is not None:
                node.stop()
