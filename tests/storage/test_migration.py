"""A database written by the release before sealed blocks (fixtures/pre-blocks.db.zst, made
by fixtures/write_release_db.py through that release's push API) is converted in place, by
`logstore migrate` or simply by starting the server, and every line comes back."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import zstandard

from tests.conftest import ROOT
from tests.helpers import stored

FIXTURE = Path(__file__).parent / "fixtures" / "pre-blocks.db.zst"
T0 = 1_700_000_000 * 10**9


def unpack(data_dir: Path) -> list[tuple]:
    """Write the fixture to data_dir; return its rows as the old schema holds them."""
    data_dir.mkdir(parents=True)
    db = data_dir / "logstore.db"
    db.write_bytes(zstandard.ZstdDecompressor().decompress(FIXTURE.read_bytes()))
    conn = sqlite3.connect(db)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "entries_fts" in tables and "blocks" not in tables  # really the old layout
    rows = conn.execute("SELECT s.labels, e.ts, e.line, e.metadata FROM entries e "
                        "JOIN streams s ON s.id = e.stream_id").fetchall()
    conn.close()
    assert len(rows) == 2400
    return rows


def as_stored(rows) -> Counter:
    return Counter((labels, ts, line, md) for labels, ts, line, md in rows)


def now_stored(data: Path) -> Counter:
    return Counter((r[1], r[2], r[3], json.dumps(r[4], separators=(",", ":")) if r[4] else None)
                   for r in stored(str(data / "logstore.db")))


def test_logstore_migrate_converts_in_place(tmp_path, make_server):
    data = tmp_path / "data"
    before = unpack(data)
    out = subprocess.run([sys.executable, "-m", "app", "migrate", "--data-dir", str(data)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == ("applied: 0004_blocks.sql, 0005_delete_requests.sql, 0006_rules.sql, "
                        "0007_patterns.sql, 0008_sessions.sql, 0009_block_ids.sql, "
                        "0010_packs.sql, 0011_seals.sql, 0012_streams_without_label_index.sql, "
                        "0013_remote_write_buffered.sql, 0014_pattern_changes.sql, "
                        "0015_alert_state_versions.sql, 0016_push_log.sql")
    assert lines[1] == "sealing 2400 head rows into blocks"
    assert lines[-2] == "sealed 2400 of 2400 rows (100%)"
    assert lines[-1] == "vacuumed: freed pages now go back to the file system"
    conn = sqlite3.connect(data / "logstore.db")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "entries_fts" not in tables and "fts_state" not in tables
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    conn.close()
    assert now_stored(data) == as_stored(before)
    # run again: nothing left to do
    again = subprocess.run([sys.executable, "-m", "app", "migrate", "--data-dir", str(data)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.stdout.splitlines() == ["applied: nothing (up to date)"]

    server = make_server({"limits_config": {"reject_old_samples": False}}, data_dir=data)
    r = httpx.get(server.url + "/loki/api/v1/query_range", params={
        "query": '{app="api"} | logfmt | level="error"', "start": str(T0),
        "end": str(T0 + 86400 * 10**9), "limit": "1000"}).json()
    want = sorted(line for labels, _, line, _ in before
                  if labels.startswith('{app="api"') and "level=error" in line)
    assert sorted(v[1] for s in r["data"]["result"] for v in s["values"]) == want


def test_starting_the_server_converts_it_too(tmp_path, make_server):
    data = tmp_path / "data"
    before = unpack(data)
    server = make_server({"limits_config": {"reject_old_samples": False}}, data_dir=data)
    # the sealer seals the old head in the background; /flush waits for all of it
    assert httpx.post(server.url + "/flush").status_code == 204
    conn = sqlite3.connect(data / "logstore.db")
    assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    conn.close()
    assert now_stored(data) == as_stored(before)
    r = httpx.get(server.url + "/loki/api/v1/query", params={
        "query": 'sum(count_over_time({env=~".+"}[2d]))',
        "time": str(T0 + 86400 * 10**9)}).json()
    assert r["data"]["result"][0]["value"][1] == "2400"
