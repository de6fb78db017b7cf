"""After sealing the WAL file is emptied: a store at rest is its database file alone (issue
25: disk includes SQLite's -wal file)."""

from __future__ import annotations

import sqlite3
import time

from tests.helpers import JSON_HEADERS, head_rows, push_body


def _push(client, n: int, offset: int = 0) -> None:
    now = time.time_ns()
    values = [[str(now - (n - i) * 10**6), f"line {offset + i} " + "x" * 200] for i in range(n)]
    r = client.post("/logstore/api/v1/push", headers=JSON_HEADERS,
                    content=push_body({"app": "wal"}, values))
    assert r.status_code == 204


def test_a_flush_leaves_no_wal_behind(make_client, tmp_path):
    data = tmp_path / "data"
    client = make_client(None, data)
    for k in range(5):
        _push(client, 2000, k * 2000)
    wal = data / "logstore.db-wal"
    assert wal.stat().st_size > 1 << 18  # the pushes went through the WAL
    assert client.post("/flush").status_code == 204
    db = sqlite3.connect(f"file:{data / 'logstore.db'}?mode=ro", uri=True)
    try:
        assert head_rows(db) == 0   # all sealed
        assert db.execute("SELECT sum(rows) FROM blocks").fetchone()[0] == 10_000
    finally:
        db.close()
    assert wal.stat().st_size == 0
    # and the store reads back whole, from the database file alone
    r = client.get("/logstore/api/v1/query",
                   params={"query": 'sum(count_over_time({app="wal"}[1h]))'})
    assert r.status_code == 200
    assert r.json()["data"]["result"][0]["value"][1] == "10000"


def test_a_flush_leaves_no_free_pages_behind(make_client, tmp_path):
    """Sealing frees the head's pages; a background round keeps a few hundred for new rows,
    a flush gives every one back (issue 25: disk after /flush)."""
    data = tmp_path / "data"
    client = make_client(None, data)
    _push(client, 1500)  # a head of fewer pages than a background round would give back
    assert client.post("/flush").status_code == 204
    db = sqlite3.connect(f"file:{data / 'logstore.db'}?mode=ro", uri=True)
    try:
        assert head_rows(db) == 0
        assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
    finally:
        db.close()
    assert (data / "logstore.db").stat().st_size == pages * size


def test_the_writer_copies_the_wal_between_batches(tmp_path):
    """The writer's COMMIT no longer checkpoints (SQLite's automatic checkpoint is off on its
    connection, so a push's reply does not wait for the copy); the writer copies the WAL
    after answering, once CHECKPOINT_PAGES frames wait. Without that the WAL would grow by
    every page written: 200 commits of about 60 pages here."""
    from storage.db import CHECKPOINT_PAGES, Database

    db = Database(str(tmp_path))
    db.open()
    try:
        assert db.write_sync(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) == 0
        db.write_sync(lambda c: c.execute("CREATE TABLE filler (x BLOB)"))
        for _ in range(200):
            db.write_sync(lambda c: c.execute("INSERT INTO filler VALUES (randomblob(240000))"))
        pages = 200 * 240_000 // 4096
        assert pages > 10 * CHECKPOINT_PAGES  # the state: far more written than one WAL's worth
        wal = (tmp_path / "logstore.db-wal").stat().st_size
        assert wal <= (CHECKPOINT_PAGES + 100) * (4096 + 24) + 32
    finally:
        db.close()
    conn = sqlite3.connect(tmp_path / "logstore.db")
    try:
        assert conn.execute("SELECT count(*), sum(length(x)) FROM filler").fetchone() == \
            (200, 200 * 240_000)
    finally:
        conn.close()
