"""A read's stream ids as one SQL condition (storage.stream_set): ranges of ids when they
are few runs, a JSON list otherwise; either way it holds for exactly the ids given."""

from __future__ import annotations

import json
import random
import sqlite3

import pytest

from storage.stream_set import MAX_RUNS, MIN_IDS, id_runs, stream_condition


@pytest.fixture(scope="module")
def table():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (stream_id INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?)", ((i,) for i in range(1, 20_001)))
    yield conn
    conn.close()


def _selected(conn, ids) -> list[int]:
    sql, params = stream_condition(ids)
    return [i for (i,) in conn.execute(f"SELECT stream_id FROM t WHERE {sql} "
                                       "ORDER BY stream_id", params)]


def _runs(*spans):
    return [i for a, b in spans for i in range(a, b + 1)]


@pytest.mark.parametrize("ids, ranges", [
    (_runs((1, 5000)), 1),                                   # a tenant alone in its file
    (_runs((3, 1500), (2000, 2600), (9000, 9999)), 3),       # tenants' creations interleaved
    (_runs(*[(k * 200 + 1, k * 200 + 150) for k in range(MAX_RUNS)]), MAX_RUNS),
])
def test_few_runs_become_ranges_that_hold_for_exactly_those_ids(table, ids, ranges):
    sql, params = stream_condition(ids)
    assert sql.count("BETWEEN") == ranges and "json_each" not in sql
    assert _selected(table, ids) == sorted(ids)
    # the order and repeats the caller gives do not matter
    shuffled = ids + ids[:10]
    random.Random(1).shuffle(shuffled)
    assert _selected(table, shuffled) == sorted(ids)
    assert _selected(table, iter(ids)) == sorted(ids)


@pytest.mark.parametrize("ids", [
    _runs(*[(k * 200 + 1, k * 200 + 150) for k in range(MAX_RUNS + 1)]),  # one run too many
    list(range(1, 20_000, 2)),                                         # every other stream
    _runs((1, MIN_IDS - 1)),                                           # too few to bother
])
def test_other_sets_stay_a_json_list(table, ids):
    sql, _ = stream_condition(ids)
    assert "json_each" in sql and "BETWEEN" not in sql
    assert _selected(table, ids) == sorted(ids)
    # a list the caller encoded already is taken as it is
    listed = json.dumps(ids)
    assert stream_condition(ids, listed=listed) == (sql, (listed,))


def test_runs():
    assert id_runs([5, 3, 4, 9, 9, 10]) == [(3, 5), (9, 10)]
    assert id_runs({5, 3, 4, 9, 10}) == [(3, 5), (9, 10)]  # any collection of ids
    assert id_runs(range(7, 2000)) == [(7, 1999)]
    assert id_runs([]) is None
