"""Removed lines leave the pattern counts (storage/patterns.py `uncount`) exactly, with a
statement per (stream, pattern, bucket), not per line, and without a look through the other
streams' samples (issue 22: a broad delete request with the pattern ingester on)."""

from __future__ import annotations

import sqlite3

import pytest

from storage.patterns import uncount


@pytest.fixture
def store(state_store):
    """Where pattern counts live (tests/conftest.py state_store)."""
    return state_store


def _seed(conn: sqlite3.Connection, streams: int) -> None:
    # per stream two clusters printing the same pattern text and one of another, three
    # buckets each
    clusters, samples = [], []
    for sid in range(1, streams + 1):
        for cid, pattern in ((1, "a <_>"), (2, "a <_>"), (3, "b <_>")):
            clusters.append((sid, cid, "[]", "x", "[]", "[]", "info", pattern))
            samples.extend((sid, cid, bucket, 3) for bucket in (0, 10, 20))
    conn.executemany("INSERT INTO pattern_clusters (stream_id, cluster_id, template, line, "
                     "spans, gaps, level, pattern) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", clusters)
    conn.executemany("INSERT INTO pattern_samples VALUES (?, ?, ?, ?)", samples)


def _uncounted(db, streams: int, counts: dict) -> tuple[list, list[str]]:
    db.write_sync(lambda conn: _seed(conn, streams))
    statements: list[str] = []

    def run(conn: sqlite3.Connection) -> list:
        traced = hasattr(conn, "set_trace_callback")
        if traced:
            conn.set_trace_callback(statements.append)
        try:
            uncount(conn, counts)
        finally:
            if traced:
                conn.set_trace_callback(None)
        return conn.execute("SELECT cluster_id, bucket, count FROM pattern_samples "
                            "WHERE stream_id = 1 ORDER BY 1, 2").fetchall()
    return db.write_sync(run), statements


def test_lines_come_off_each_template_that_prints_the_pattern(store):
    # 4 lines of "a <_>" in bucket 10: 3 from cluster 1 (gone), 1 from cluster 2; 2 of
    # "b <_>" in bucket 0; 7 of "a <_>" in bucket 20: all 6 there
    left, _ = _uncounted(store, 1, {(1, "a <_>", 10): 4, (1, "b <_>", 0): 2,
                                 (1, "a <_>", 20): 7})
    assert [tuple(r) for r in left] == [(1, 0, 3), (2, 0, 3), (2, 10, 2), (3, 0, 1),
                                        (3, 10, 3), (3, 20, 3)]


def test_statements_follow_the_keys_not_the_lines_or_the_streams(db):
    _, few = _uncounted(db, 50, {(7, "a <_>", 10): 5})
    assert len(few) <= 4, few
    # nothing looks through every stream's samples
    assert not [s for s in few if "count <= 0" in s or "pattern_samples WHERE count" in s]
