"""The remote-write buffer's bound (storage/rules.py): beyond max_buffered_samples a client's
oldest samples are dropped, at a cost that does not grow with the samples buffered (issue 22:
a receiver away for hours fills the buffer to a million, and every recording-rule evaluation
enqueues into it). The counts kept beside the buffer follow every insert, drop and send, on
the SQLite file and on a cluster's shared PostgreSQL, through migration 0013 and a copy into
PostgreSQL (`logstore copy-to-clickhouse`)."""

from __future__ import annotations

import sqlite3

import pytest

from storage import rules as store


@pytest.fixture
def state(state_store):
    """Where the buffer lives (tests/conftest.py state_store)."""
    return state_store


def _samples(first: int, n: int) -> list[tuple[dict[str, str], int, float]]:
    return [({"__name__": "job:lines:rate5m", "pod": f"p{i}"}, 1_000 + i, float(i))
            for i in range(first, first + n)]


def _buffer(state, clients: list[str], first: int, n: int, max_buffered: int) -> int:
    return state.write_sync(lambda conn: store.buffer_samples(
        conn, clients, "fake", _samples(first, n), max_buffered))


def _values(state, client: str) -> list[float]:
    return [r[4] for r in state.read_sync(store.oldest_samples, client, 1_000)]


def test_each_client_keeps_its_newest_samples_and_their_count(state):
    assert _buffer(state, ["a", "b"], 0, 5, 8) == 0
    assert state.read_sync(store.buffered) == {"a": 5, "b": 5}
    assert _buffer(state, ["a", "b"], 5, 5, 8) == 4  # 2 of each client's oldest
    assert state.read_sync(store.buffered) == {"a": 8, "b": 8}
    assert _values(state, "a") == _values(state, "b") == [float(v) for v in range(2, 10)]

    sent = [r[0] for r in state.read_sync(store.oldest_samples, "a", 3)]
    assert state.write_sync(lambda conn: store.forget_samples(conn, "a", sent)) == 3
    assert state.write_sync(lambda conn: store.forget_samples(conn, "a", sent)) == 0
    assert state.read_sync(store.buffered) == {"a": 5, "b": 8}
    assert _values(state, "a") == [float(v) for v in range(5, 10)]

    # one evaluation bringing more than the bound keeps its newest
    assert _buffer(state, ["a"], 10, 12, 8) == 9
    assert _values(state, "a") == [float(v) for v in range(14, 22)]
    for client in ("a", "b"):
        ids = [r[0] for r in state.read_sync(store.oldest_samples, client, 100)]
        state.write_sync(lambda conn: store.forget_samples(conn, client, ids))
    assert state.read_sync(store.buffered) == {}


def _enqueue_steps(db, buffered: int) -> int:
    """SQLite virtual machine steps (in tens) of one evaluation's 10 samples enqueued into a
    buffer of `buffered`, at its bound (10 dropped)."""
    for first in range(0, buffered, 5_000):
        _buffer(db, ["gone"], first, min(5_000, buffered - first), buffered)
    assert db.read_sync(store.buffered) == {"gone": buffered}
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    def enqueue(conn: sqlite3.Connection) -> int:
        conn.set_progress_handler(step, 10)
        try:
            return store.buffer_samples(conn, ["gone"], "fake", _samples(buffered, 10),
                                        buffered)
        finally:
            conn.set_progress_handler(None, 0)

    assert db.write_sync(enqueue) == 10
    assert db.read_sync(store.buffered) == {"gone": buffered}
    return steps


def test_the_bound_costs_the_same_however_full_the_buffer(tmp_path):
    from storage.db import Database

    steps = []
    for buffered in (1_000, 20_000):
        db = Database(str(tmp_path / str(buffered)))
        db.open()
        try:
            steps.append(_enqueue_steps(db, buffered))
        finally:
            db.close()
    # 53 tens of steps at both; counting the client's rows took 349 and 6,050
    assert steps[1] <= steps[0] + 5, steps


def test_migration_0013_counts_what_was_buffered(tmp_path, monkeypatch):
    from storage import db as db_module

    every = db_module.migration_files()
    monkeypatch.setattr(db_module, "migration_files", lambda: [m for m in every if m[0] < 13])
    conn = db_module.connect(str(tmp_path / "logstore.db"))
    db_module.migrate(conn)
    conn.executemany("INSERT INTO remote_write_buffer (client, tenant, labels, ts_ms, value) "
                     "VALUES (?, 'fake', '{}', 1, 1.0)", [("a",)] * 3 + [("b",)] * 2)
    monkeypatch.undo()
    assert db_module.migrate(conn)[0] == "0013_remote_write_buffered.sql"
    assert store.buffered(conn) == {"a": 3, "b": 2}
    conn.close()


def test_a_copy_into_postgresql_counts_the_copied_samples(db, postgres_url):
    from services.upkeep.copy_shared import copy_shared
    from storage.shared.postgres import PostgresState

    _buffer(db, ["a", "b"], 0, 4, 100)
    shared = PostgresState(postgres_url)
    shared.open()
    try:
        conn = sqlite3.connect(db.path)
        try:
            assert copy_shared(conn, shared, lambda line: None)
        finally:
            conn.close()
        assert shared.read_sync(store.buffered) == {"a": 4, "b": 4}
        assert _values(shared, "b") == [0.0, 1.0, 2.0, 3.0]
    finally:
        shared.close()
