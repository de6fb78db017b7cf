"""`logstore backup DEST` while the server serves and takes pushes: a server started on DEST
answers as the original did for what was there before, and of what was pushed during the
backup it holds a prefix of whole pushes. An interrupted backup leaves no database behind."""

from __future__ import annotations

import io
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx

from app import main
from storage.backup import backup_command
from storage.db import Database
from tests.conftest import ROOT
from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body

LINES_PER_PUSH = 20


class Pusher(threading.Thread):
    """Pushes batch after batch of `{job="load"}` lines, one request at a time."""

    def __init__(self, url: str, t0: int):
        super().__init__(daemon=True)
        self.url, self.t0 = url, t0
        self.sent = 0  # batches whose request has begun
        self.acked: list[int] = []
        self.error: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            with httpx.Client(timeout=30) as client:
                while not self.stopping.is_set():
                    b = self.sent
                    values = [[str(self.t0 + b * LINES_PER_PUSH + i), f"batch={b} line={i}"]
                              for i in range(LINES_PER_PUSH)]
                    self.sent += 1
                    r = client.post(self.url + PUSH, content=push_body({"job": "load"}, values),
                                    headers=JSON_HEADERS)
                    assert r.status_code == 204, r.text
                    self.acked.append(b)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def answers(url: str, start: int, end: int) -> dict:
    """What a user sees of the data pushed before the backup (the stats block, which holds
    timings, left out)."""
    window = {"start": str(start), "end": str(end)}
    selector = '{job=~"api|db|web"}'

    def get(path: str, **params) -> dict:
        r = httpx.get(url + path, params={**window, **params}, timeout=30)
        assert r.status_code == 200, r.text
        return r.json()["data"]

    return {
        "logs": get("/loki/api/v1/query_range", query=selector, limit="5000",
                    direction="forward")["result"],
        "filtered": get("/loki/api/v1/query_range", query=selector + ' |= "status=500"',
                        limit="5000")["result"],
        "counts": get("/loki/api/v1/query_range", step="60",
                      query=f"sum by (job) (count_over_time({selector} [1m]))")["result"],
        "series": get("/loki/api/v1/series", **{"match[]": selector}),
        "labels": get("/loki/api/v1/labels"),
        "jobs": get("/loki/api/v1/label/job/values"),
    }


def load_batches(url: str, start: int, end: int) -> Counter:
    """Lines stored per pushed batch, read page by page."""
    found: Counter = Counter()
    while True:
        r = httpx.get(url + "/loki/api/v1/query_range", timeout=30, params={
            "query": '{job="load"}', "start": str(start), "end": str(end), "limit": "5000",
            "direction": "forward"})
        assert r.status_code == 200, r.text
        values = [v for s in r.json()["data"]["result"] for v in s["values"]]
        found.update(int(re.match(r"batch=(\d+) ", line).group(1)) for _, line in values)
        if len(values) < 5000:
            return found
        start = int(values[-1][0]) + 1


def test_backup_under_load_restores_to_the_same_answers(make_server, tmp_path):
    server = make_server()
    t0 = now_ns() - 1200 * 10**9
    for n, job in enumerate(("api", "db", "web")):
        values = [[str(t0 + (n * 300 + i) * 10**9),
                   f"level=info status={500 if i % 7 == 0 else 200} job={job} i={i}"]
                  for i in range(300)]
        r = httpx.post(server.url + PUSH, content=push_body({"job": job, "env": "prod"}, values),
                       headers=JSON_HEADERS)
        assert r.status_code == 204

    load = Pusher(server.url, t0 + 1000 * 10**9)
    load.start()
    while len(load.acked) < 5 and load.is_alive():  # polling for the state: the load runs
        load.stopping.wait(0.01)
    dest = tmp_path / "restored"
    acked_before = len(load.acked)
    # the cap stretches the copy of this small database over about a second and a half
    size = database_bytes(server.data_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "backup", str(dest), "--config", str(server.config_path),
         "--max-rate", str(size * 2 // 3)],
        cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    # the snapshot is taken before this line: a push begun after it is not in the backup
    sent_at_snapshot, acked_at_snapshot = load.sent, len(load.acked)
    assert first.startswith(f"backup: copying {server.data_dir}/logstore.db ("), first
    rest = proc.stderr.read()
    assert proc.wait(30) == 0, first + rest
    acked_after = len(load.acked)
    load.stopping.set()
    load.join(30)
    assert load.error is None, load.error
    assert acked_after > acked_at_snapshot  # the server took pushes while the copy ran
    lines = rest.splitlines()
    assert any(re.fullmatch(r"backup: \d+% \(\d+ of \d+ pages\)", line) for line in lines), rest
    assert lines[-1].startswith(f"backup: done: {dest}/logstore.db ("), rest
    assert sorted(p.name for p in dest.iterdir()) == ["logstore.db"]

    window = (t0 - 10**9, now_ns())
    expected = answers(server.url, *window)
    assert len(expected["logs"]) == 3 and len(expected["counts"]) == 3
    restored = make_server(data_dir=dest)
    assert answers(restored.url, *window) == expected

    batches = load_batches(restored.url, *window)
    kept = len(batches)
    assert set(batches) == set(range(kept))  # a prefix of the pushes ...
    assert set(batches.values()) == {LINES_PER_PUSH}  # ... each one whole
    assert acked_before <= kept <= sent_at_snapshot


def database_bytes(data: Path) -> int:
    conn = sqlite3.connect(f"file:{data}/logstore.db?mode=ro", uri=True)
    try:
        return conn.execute("SELECT page_count * page_size FROM pragma_page_count, "
                            "pragma_page_size").fetchone()[0]
    finally:
        conn.close()


def _database(data: Path) -> None:
    db = Database(str(data))
    db.open()
    db.close()


def test_a_killed_backup_leaves_no_database(tmp_path):
    data, dest = tmp_path / "data", tmp_path / "copy"
    _database(data)
    # killed once every page is copied, before the copy is renamed into place
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys\n"
        "from storage.backup import backup\n"
        "backup(sys.argv[1], sys.argv[2],\n"
        "       progress=lambda done, total: os.kill(os.getpid(), signal.SIGKILL))\n"),
        str(data), str(dest)], cwd=ROOT, capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    assert sorted(p.name for p in dest.iterdir()) == ["logstore.db.partial"]

    err = io.StringIO()
    assert backup_command(str(data), str(dest), out=err) == 0, err.getvalue()
    assert sorted(p.name for p in dest.iterdir()) == ["logstore.db"]
    conn = sqlite3.connect(dest / "logstore.db")
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


def test_an_interrupted_or_refused_backup_writes_nothing(tmp_path, capsys):
    data, dest = tmp_path / "data", tmp_path / "copy"
    _database(data)
    size = database_bytes(data)
    proc = subprocess.Popen(  # a copy capped to take three seconds, interrupted at once
        [sys.executable, "-m", "app", "backup", str(dest), "--data-dir", str(data),
         "--max-rate", str(size // 3)],
        cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stderr.readline().startswith("backup: copying ")
    assert (dest / "logstore.db.partial").exists()  # the copy is under way
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert proc.wait(30) == 130
    assert proc.stderr.read() == f"logstore: backup interrupted, nothing was left in {dest}\n"
    assert list(dest.iterdir()) == []

    assert main(["backup", str(data), "--data-dir", str(data)]) == 1
    assert capsys.readouterr().err == (
        f"logstore: backup failed: {data} already holds a database ({data}/logstore.db); back "
        f"up into a new or empty directory\n")
