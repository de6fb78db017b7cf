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
            conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, "
                         "last_ts) VALUES (1, 't', '{a=\"good\"}', 1, 0, 0)")

        def bad(conn):
            conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, "
                         "last_ts) VALUES (2, 't', '{a=\"bad\"}', 2, 0, 0)")
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
    # the third insert collides with the first (the same id) and fails alone
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
    cache = db.stream_ids

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


def test_a_push_that_fails_beside_others_leaves_nothing_and_the_stream_can_be_pushed_again(db):
    """As above, but the failing write shares its transaction with another: only its
    savepoint is rolled back, and the writer forgets the ids it learned all the same (it
    used to keep them, and the next push wrote lines for a stream that was gone)."""
    ingester = Ingester(db, Limits(config_module.Config().limits_config))
    ts = now_ns()
    prepared, _ = ingester.preparer.prepare([RawStream([("app", "api")], [(ts, "first", None)])],
                                            ts, ingester.limits.of("fake"))

    def append_then_fail(conn):
        append(conn, db.stream_ids, "fake", prepared)
        raise ValueError("refused after the stream was made")

    async def scenario():
        loop = asyncio.get_running_loop()
        blocked, running, release = _hold_writer(db, loop)
        await loop.run_in_executor(None, running.wait, 30)
        failing = loop.create_task(db.write(append_then_fail))
        other = loop.create_task(ingester.push("fake", [RawStream([("app", "web")],
                                                                  [(ts, "web", None)])]))
        while db._queue.qsize() < 2:
            await asyncio.sleep(0)
        commits = db.commits
        release.set()
        await blocked
        results = await asyncio.gather(failing, other, return_exceptions=True)
        return results, db.commits - commits

    (failed, outcome), commits = asyncio.run(scenario())
    assert commits == 2 and isinstance(failed, ValueError) and outcome.errors == []
    assert db.read_sync(lambda conn: conn.execute(
        "SELECT labels FROM streams").fetchall()) == [('{app="web", service_name="web"}',)]

    outcome = asyncio.run(ingester.push("fake", [RawStream([("app", "api")],
                                                           [(ts + 1, "second", None)])]))
    assert outcome.errors == []
    rows = db.read_sync(lambda conn: conn.execute(
        "SELECT s.labels, e.line FROM entries e JOIN streams s ON s.id = e.stream_id "
        "ORDER BY e.id").fetchall())
    assert rows == [('{app="web", service_name="web"}', "web"),
                    ('{app="api", service_name="api"}', "second")]


def test_a_label_set_stays_one_stream_across_restarts(tmp_path):
    """The writer knows streams by label set from memory (the table has no index on labels):
    after a restart it loads them, so a stream pushed again is the stream it was."""
    path = str(tmp_path / "d")
    ts = now_ns()
    for k in range(3):
        database = Database(path)
        database.open()
        try:
            assert database.stream_ids.loaded is False  # a fresh process knows nothing yet
            ingester = Ingester(database, Limits(config_module.Config().limits_config))
            outcome = asyncio.run(ingester.push("fake", [
                RawStream([("app", "api")], [(ts + k, f"api {k}", None)]),
                RawStream([("app", f"new{k}")], [(ts + k, f"new {k}", None)])]))
            assert outcome.errors == []
        finally:
            database.close()
    database = Database(path)
    database.open()
    try:
        rows = database.read_sync(lambda conn: conn.execute(
            "SELECT s.id, s.labels, group_concat(e.line, '|') FROM streams s "
            "JOIN entries e ON e.stream_id = s.id GROUP BY s.id ORDER BY s.id").fetchall())
    finally:
        database.close()
    assert rows == [(1, '{app="api", service_name="api"}', "api 0|api 1|api 2"),
                    (2, '{app="new0", service_name="new0"}', "new 0"),
                    (3, '{app="new1", service_name="new1"}', "new 1"),
                    (4, '{app="new2", service_name="new2"}', "new 2")]


def test_writes_that_may_run_again_go_without_savepoints_and_a_failure_still_fails_alone(db):
    """Pushes (`write(fn, rerun=True)`) share the transaction without a savepoint each; when
    one fails, the transaction is rolled back and they run again each in its savepoint, so
    the others commit once and the failing one fails alone."""
    statements: list[str] = []
    db._writer_conn.set_trace_callback(statements.append)  # the writer thread calls it
    calls = {"good": 0, "bad": 0, "other": 0}

    def insert(conn, sid, name):
        calls[name] += 1
        conn.execute("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, "
                      "last_ts) VALUES (?, 't', ?, 1, 0, 0)", (sid, f'{{a="{name}"}}'))

    def bad(conn):
        insert(conn, 2, "bad")
        raise ValueError("refused half-way")

    async def scenario(fns):
        loop = asyncio.get_running_loop()
        blocked, running, release = _hold_writer(db, loop)
        await loop.run_in_executor(None, running.wait, 30)
        tasks = [loop.create_task(db.write(fn, rerun=True)) for fn in fns]
        while db._queue.qsize() < len(fns):
            await asyncio.sleep(0)
        commits = db.commits
        release.set()
        await blocked
        return await asyncio.gather(*tasks, return_exceptions=True), db.commits - commits

    # all succeed: one transaction for the three, and not one savepoint
    results, commits = asyncio.run(scenario([
        lambda conn: insert(conn, 1, "good"), lambda conn: insert(conn, 3, "other")]))
    assert results == [None, None] and commits == 2  # the blocker's, then the two together
    assert not any("SAVEPOINT" in s for s in statements)
    assert calls == {"good": 1, "bad": 0, "other": 1}

    statements.clear()
    results, commits = asyncio.run(scenario([
        lambda conn: insert(conn, 4, "good"), bad, lambda conn: insert(conn, 5, "other")]))
    assert results[0] is None and isinstance(results[1], ValueError) and results[2] is None
    # the first attempt went without savepoints and was rolled back; the second had them
    first = statements.index("ROLLBACK")
    assert not any("SAVEPOINT" in s for s in statements[:first])
    assert sum(s == "SAVEPOINT work" for s in statements[first:]) == 3
    # the first attempt stopped at the failure: the third ran once, in the second
    assert calls == {"good": 3, "bad": 2, "other": 2}
    db._writer_conn.set_trace_callback(None)
    labels = db.read_sync(lambda conn: [r[0] for r in conn.execute(
        "SELECT labels FROM streams ORDER BY id")])
    assert labels == ['{a="good"}', '{a="other"}', '{a="good"}', '{a="other"}']
