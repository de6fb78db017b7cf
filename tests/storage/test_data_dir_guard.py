"""A data directory has one logstore at a time, and an older logstore does not open a
database a newer one migrated."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from storage.db import Database, DatabaseTooNew
from tests.conftest import ROOT, free_port
from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body


def logstore(*args: str) -> subprocess.CompletedProcess:
    """Run the CLI; one that should have refused but serves is stopped, with its worker."""
    proc = subprocess.Popen([sys.executable, "-m", "app", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"logstore {' '.join(args)} still running after 30 s")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def serve_args(config: Path) -> list[str]:
    return ["serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(free_port())]


def test_a_second_logstore_on_the_same_directory_is_refused(server):
    t = now_ns()
    r = httpx.post(server.url + PUSH, content=push_body({"app": "a"}, [[str(t), "first"]]),
                   headers=JSON_HEADERS)
    assert r.status_code == 204
    in_use = (f"logstore: data directory {server.data_dir} is in use by another logstore "
              f"(pid {server.proc.pid})\n")

    second = logstore(*serve_args(server.config_path))
    assert (second.returncode, second.stderr, second.stdout) == (1, in_use, "")
    migrate = logstore("migrate", "--config", str(server.config_path))
    assert (migrate.returncode, migrate.stderr, migrate.stdout) == (1, in_use, "")

    # the first one never noticed
    assert httpx.get(server.url + "/ready").status_code == 200
    r = httpx.post(server.url + PUSH, content=push_body({"app": "a"}, [[str(t + 1), "second"]]),
                   headers=JSON_HEADERS)
    assert r.status_code == 204
    r = httpx.get(server.url + "/loki/api/v1/query_range",
                  params={"query": '{app="a"}', "start": str(t - 10**9), "end": str(t + 10**9),
                          "direction": "forward"})
    assert [v[1] for v in r.json()["data"]["result"][0]["values"]] == ["first", "second"]

    # a killed server leaves no lock behind: the kernel drops it with the process
    server.kill()
    migrate = logstore("migrate", "--config", str(server.config_path))
    assert (migrate.returncode, migrate.stderr) == (0, ""), migrate.stderr
    assert migrate.stdout.startswith("applied: nothing (up to date)\n")


def test_a_database_from_a_newer_logstore_is_refused_and_left_alone(tmp_path):
    data = tmp_path / "data"
    db = Database(str(data))
    db.open()
    db.close()
    conn = sqlite3.connect(data / "logstore.db")
    # recorded as migrate() records one: a release with a migration this one lacks
    with conn:
        conn.execute("INSERT INTO schema_version (version, name, applied_at) "
                     "VALUES (9999, '9999_from_the_future.sql', '2030-01-01T00:00:00Z')")
    conn.close()
    before = (data / "logstore.db").read_bytes()
    files = sorted(p.name for p in data.iterdir())
    assert files == ["logstore.db", "logstore.lock"]  # at rest: no WAL left to hide a change

    refused = (f"logstore: the database {data}/logstore.db was migrated by a newer logstore: "
               f"it records migration 9999_from_the_future.sql, which this logstore does not "
               f"know. Run a newer logstore on it, or restore a backup made before the "
               f"upgrade; the database was left unchanged\n")
    for args in (["serve", "--data-dir", str(data), "--host", "127.0.0.1",
                  "--port", str(free_port())],
                 ["migrate", "--data-dir", str(data)]):
        out = logstore(*args)
        assert (out.returncode, out.stderr, out.stdout) == (1, refused, ""), args
    # an app opening the store itself (granian app:app, an embedding program) refuses too
    with pytest.raises(DatabaseTooNew):
        Database(str(data)).open()

    assert (data / "logstore.db").read_bytes() == before
    assert sorted(p.name for p in data.iterdir()) == files
