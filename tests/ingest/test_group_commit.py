"""Concurrent pushes share one transaction, and a failing write does not sink its neighbours."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

import config as config_module
from services.ingest.ingester import Ingester
from services.ingest.prepare import RawStream
from services.runtime.limits import Limits
from storage.db import Database
from storage.entries import append
from tests.helpers import head_rows, now_ns


@pytest.fixture
def db(tmp_path):
    database = Database(str(tmp_path / "d"))
    database.open()
    yield database
    database.close()


def _hold_writer(db: Database, loop: asyncio.AbstractEventLoop):
    """Occupy the writer thread until released, so that later work queues up behind it."""
    running, release = threading.Event(), threading.Event()

    def blocker(conn: sqlite3.Connection) -> None:
        running.set()
        release.wait(30)

    task = loop.create_task(db.write(blocker))
    return task, running, release


def test_concurrent_pushes_commit_together(db):
    ingester = Ingester(db, Limits(config_module.Config().limits_config))

    async def scenario() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        blocked, running, release = _hold_writer(db, loop)
        await loop.run_in_executor(None, running.wait, 30)
        before = db.commits
        ts = now_ns()
        pushes = [loop.create_task(ingester.push("fake", [RawStream(
            [("app", f"a{i}")], [(ts, f"line {i}", None)])])) for i in range(20)]
        # every push is prepared and queued behind the blocker before it is released
        while db._queue.qsize() < 20:
            await asyncio.sleep(0)
        release.set()
        await blocked
        outcomes = await asyncio.gather(*pushes)
        assert all(o.errors == [] for o in outcomes)
        return db.commits - before, len(outcomes)

    commits, pushed = asyncio.run(scenario())
    assert pushed == 20
    assert commits == 2  # the blocker's transaction, then one for all twenty pushes
    count = db.read_sync(head_rows)
    assert count == 20


def test_a_failing_write_rolls_back_only_itself(db):
    async def scenario():
        loop = asyncio.get_running_loop()
        blocked, running, release = _hold_writer(db, loop)
        await loop.run_in_executor(None, running.wait, 30)

        def good(conn):
            conn.execute("INSERT INTO streams (tenant, labels, fingerprint, first_ts, last_ts) "
                         "VALUES ('t', '{a=\"good\"}', 1, 0, 0)")

        def bad(conn):
            conn.execute("INSERT INTO streams (tenant, labels, fingerprint, first_ts, last_ts) "
                         "VALUES ('t', '{a=\"bad\"}', 2, 0, 0)")
            raise ValueError("refused half-way")

        first, second, third = (loop.create_task(db.write(fn)) for fn in (good, bad, good))
        while db._queue.qsize() < 3:
            await asyncio.sleep(0)
        release.set()
        await blocked
        return await asyncio.gather(first, second, third, return_exceptions=True)

    results = asyncio.run(scenario())
    assert results[0] is None
    assert isinstance(results[1], ValueError)
    # the third insert collides with the first (UNIQUE tenant, labels) and fails alone
    assert isinstance(results[2], sqlite3.IntegrityError)
    labels = db.read_sync(lambda conn: [r[0] for r in conn.execute(
        "SELECT labels FROM streams ORDER BY id")])
    assert labels == ['{a="good"}']


def test_a_push_that_fails_alone_leaves_nothing_and_the_stream_can_be_pushed_again(db):
    """A write alone in its transaction fails after creating a stream: the stream is gone
    with it, and the next push of that stream creates it again (the writer forgets the id
    it had learned)."""
    ingester = Ingester(db, Limits(config_module.Config().limits_config))
    ts = now_ns()
    raw = [RawStream([("app", "api")], [(ts, "first try", None)])]
    prepared, _ = ingester.preparer.prepare(raw, ts, ingester.limits.of("fake"))
    cache = db.writer_cache.setdefault("streams", {})

    def append_then_fail(conn):
        append(conn, cache, "fake", prepared)
        raise ValueError("refused after the stream was made")

    with pytest.raises(ValueError):
        db.write_sync(append_then_fail)
    assert db.read_sync(lambda conn: conn.execute(
        "SELECT count(*) FROM streams").fetchone()[0]) == 0

    outcome = asyncio.run(ingester.push("fake", [RawStream([("app", "api")],
                                                           [(ts + 1, "second try", None)])]))
    assert outcome.errors == []
    rows = db.read_sync(lambda conn: conn.execute(
        "SELECT s.labels, e.line FROM entries e JOIN streams s ON s.id = e.stream_id").fetchall())
    assert rows == [('{app="api", service_name="api"}', "second try")]
