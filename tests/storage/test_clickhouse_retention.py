"""Retention and delete requests on ClickHouse (storage/clickhouse/removal.py): a sweep
removes the expired lines of every stream that shares a tenant and a cutoff with one DELETE,
not one per stream (each DELETE is a mutation ClickHouse applies to every part it touches),
keeps the rollups those of the lines left, and drops the streams it emptied with their
postings, together; a delete request's picked lines go in one DELETE whatever their streams.

The DELETEs are counted as the mutations ClickHouse recorded (`system.mutations`); what is
left is read back from the tables and through the API."""

from __future__ import annotations

import pytest

from storage.clickhouse import removal
from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body
from tests.storage.test_clickhouse_backend import _client, _config

NS = 10**9
H = 3600 * NS
NOW = now_ns()
OLD = [NOW - 72 * H + i * NS for i in range(3)]      # expired under a 2-day rule
RECENT = [NOW - H + i * NS for i in range(2)]
SHORT, EMPTIED, LONG = 25, 10, 5  # pods under the 2-day rule (the first 10 only old lines)


def _mutations(store) -> dict[str, int]:
    """The mutations ClickHouse recorded, by table: a lightweight DELETE is one. Not those
    that put a new TTL on the parts already written (_ttl_mutations)."""
    return dict(store.client.query(
        "SELECT table, count() FROM system.mutations WHERE database = {d:String} "
        "AND command NOT LIKE '%MATERIALIZE TTL%' GROUP BY table", {"d": store.db}))


def _ttl_mutations(store) -> dict[str, int]:
    return dict(store.client.query(
        "SELECT table, count() FROM system.mutations WHERE database = {d:String} "
        "AND command LIKE '%MATERIALIZE TTL%' GROUP BY table", {"d": store.db}))


def _streams() -> list[tuple[dict, list[int]]]:
    out = [({"app": "short", "pod": f"s{i}"}, OLD if i < EMPTIED else OLD + RECENT)
           for i in range(SHORT)]
    return out + [({"app": "long", "pod": f"l{i}"}, OLD + RECENT) for i in range(LONG)]


def test_a_sweep_removes_a_retention_period_with_one_delete(tmp_path):
    cfg = {**_config(tmp_path),
           "limits_config": {"reject_old_samples": False, "retention_period": "30d",
                             "retention_stream": [{"selector": '{app="short"}',
                                                   "priority": 1, "period": "2d"}]},
           "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"}}
    with _client(cfg) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.stop)  # the test runs the one sweep
        # lines stored under no rule (copied from SQLite, or before lines recorded theirs):
        # the TTL of the rule does not cover them, DELETEs remove them
        # (tests/storage/test_clickhouse_ttl.py has the lines stored under the rule)
        ctx.querier.store.rule_of = None
        for labels, stamps in _streams():
            r = c.post(PUSH, content=push_body(labels, [[str(ts), f"{labels['pod']} {ts}"]
                                                         for ts in stamps]),
                       headers=JSON_HEADERS)
            assert r.status_code == 204, r.text
        store = ctx.querier.store
        total = SHORT * 3 + (SHORT - EMPTIED) * 2 + LONG * 5
        assert store.rows() == total  # the state: every line stored, the old ones too
        assert _mutations(store) == {}
        removed = c.blocking_portal.call(ctx.compactor.run_once)

        assert removed == SHORT * 3
        # the 25 pods' old lines; the 15 kept pods' ranges, then the 10 emptied pods' rows;
        # their postings
        assert _mutations(store) == {"entries": 1, "streams": 2, "stream_labels": 1}
        left = total - removed
        assert store.rows() == left
        assert store.client.query(f"SELECT sum(lines) FROM {store.db}.rollups") == [[left]]
        assert store.client.query(
            f"SELECT count(DISTINCT id) FROM {store.db}.streams") == [[SHORT - EMPTIED + LONG]]
        r = c.get("/logstore/api/v1/series", params={
            "match[]": '{app="short"}', "start": str(NOW - 96 * H), "end": str(NOW)})
        assert sorted(s["pod"] for s in r.json()["data"]) == sorted(
            f"s{i}" for i in range(EMPTIED, SHORT))
        r = c.get("/logstore/api/v1/query", params={
            "query": 'sum by (app) (count_over_time({app=~".+"}[4d]))', "time": str(NOW)})
        assert {s["metric"]["app"]: s["value"][1] for s in r.json()["data"]["result"]} == {
            "short": str((SHORT - EMPTIED) * 2), "long": str(LONG * 5)}


@pytest.mark.parametrize("batch, statements", [(removal.DELETE_BATCH, 1), (10, 8)])
def test_a_delete_request_over_many_streams_is_one_delete(tmp_path, monkeypatch, batch,
                                                          statements):
    """...or one per DELETE_BATCH lines: 75 lines of 25 streams at 10 a statement are 8,
    batches that cut through streams."""
    monkeypatch.setattr(removal, "DELETE_BATCH", batch)
    cfg = {**_config(tmp_path),
           "limits_config": {"reject_old_samples": False},
           "compactor": {"retention_enabled": True, "delete_request_cancel_period": "0s"}}
    with _client(cfg) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.stop)
        for i in range(SHORT):
            lines = [[str(ts), f"s{i} {'drop' if k % 2 else 'keep'} {k}"]
                     for k, ts in enumerate(RECENT + [NOW - 30 * 60 * NS + k * NS
                                                      for k in range(4)])]
            r = c.post(PUSH, content=push_body({"app": "short", "pod": f"s{i}"}, lines),
                       headers=JSON_HEADERS)
            assert r.status_code == 204, r.text
        r = c.post("/logstore/api/v1/delete", params={
            "query": '{app="short"} |= "drop"', "start": str(NOW // NS - 7200),
            "end": str(NOW // NS)})
        assert r.status_code == 204, r.text
        store = ctx.querier.store
        assert store.rows() == SHORT * 6  # the state: nothing removed yet
        assert _mutations(store) == {}
        queries: list[str] = []
        query = store.client.query
        monkeypatch.setattr(store.client, "query",
                            lambda sql, *a, **k: queries.append(sql) or query(sql, *a, **k))
        removed = c.blocking_portal.call(ctx.compactor.run_once)
        monkeypatch.setattr(store.client, "query", query)

        assert removed == SHORT * 3
        # the 25 pods' lines read in one query, after one that counts them (issue 22: a
        # query per stream before)
        reads = [q for q in queries if "SELECT stream_id, seq" in q or "SELECT seq" in q]
        assert len(reads) == 1, reads
        # the 25 pods' picked lines (75 of them), DELETE_BATCH to a statement
        assert _mutations(store) == {"entries": statements}
        assert store.rows() == SHORT * 3
        assert store.client.query(f"SELECT sum(lines) FROM {store.db}.rollups") == [
            [SHORT * 3]]
        assert [q["status"] for q in c.get("/logstore/api/v1/delete").json()] == [
            "processed"]
        r = c.get("/logstore/api/v1/query", params={
            "query": 'sum(count_over_time({app="short"} |= "keep" [3h]))', "time": str(NOW)})
        assert r.json()["data"]["result"][0]["value"][1] == str(SHORT * 3)


def test_a_delete_request_reads_whole_streams_in_bounded_batches(monkeypatch):
    monkeypatch.setattr(removal, "READ_ROWS", 100)
    # a stream over the bound alone; the rest together up to it, and to EXPIRE_STREAMS
    assert removal._read_batches([(1, 150), (2, 60), (3, 40), (4, 1)]) == [[1], [2, 3], [4]]
    many = [(sid, 0) for sid in range(removal.EXPIRE_STREAMS + 1)]
    assert [len(b) for b in removal._read_batches(many)] == [removal.EXPIRE_STREAMS, 1]


D = 24 * H
MINUTE = 60 * NS


@pytest.mark.parametrize("by_ttl", [False, True], ids=["deleted", "left-to-the-ttl"])
def test_a_sweep_touches_only_the_streams_with_something_expired(tmp_path, monkeypatch,
                                                                  by_ttl):
    """A stream's range starts at its oldest line left after a sweep, not at the sweep's
    cut: the next sweep, 10 minutes on, found every stream starting before its own cut and
    rewrote each one's row (issue 22). Now a sweep with nothing expired since the last
    reads no line and writes nothing, and one where 3 pods of 12 have a line expired since
    rewrites their 3 rows. Lines under no rule are deleted by DELETEs; under the rule, left
    to its TTL (only the ranges move)."""
    cfg = {**_config(tmp_path),
           "limits_config": {"reject_old_samples": False, "retention_period": "30d",
                             "retention_stream": [{"selector": '{app="short"}',
                                                   "priority": 1, "period": "2d"}]},
           "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"}}
    cut = NOW - 2 * H  # the first sweep's; hours old for ClickHouse's clock (the TTL's)
    old, soon, kept = cut - H, cut + 5 * MINUTE, cut + 20 * MINUTE
    with _client(cfg) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.stop)  # the test runs the sweeps
        store = ctx.querier.store
        if not by_ttl:
            store.rule_of = None
        # pods 0-1 only an old line, 2-11 a kept one too, 2-4 one more expiring in between
        for i in range(12):
            stamps = [old] + ([soon] if 2 <= i <= 4 else []) + ([kept] if i >= 2 else [])
            r = c.post(PUSH, content=push_body({"app": "short", "pod": f"p{i}"},
                                               [[str(ts + i), f"p{i} {ts}"] for ts in stamps]),
                       headers=JSON_HEADERS)
            assert r.status_code == 204, r.text
        assert store.rows() == 12 + 3 + 10  # the state: every line stored
        # what a sweep sends: each query, and the rows of each insert by table
        sent: dict[str, list] = {"queries": [], "inserted": []}
        query, insert = store.client.query, store.client.insert

        def counted_query(sql, *args, **kwargs):
            sent["queries"].append(sql)
            return query(sql, *args, **kwargs)

        def counted_insert(table, columns, rows):
            sent["inserted"].append((table.rsplit(".", 1)[1], len(rows)))
            return insert(table, columns, rows)

        monkeypatch.setattr(store.client, "query", counted_query)
        monkeypatch.setattr(store.client, "insert", counted_insert)

        def sweep(at: int) -> tuple[int, dict[str, int]]:
            ctx.compactor.policy.clock = lambda: at + 2 * D
            sent["queries"], sent["inserted"] = [], []
            before = _mutations(store)
            removed = c.blocking_portal.call(ctx.compactor.run_once)
            after = _mutations(store)
            return removed, {t: n - before.get(t, 0) for t, n in after.items()
                             if n != before.get(t, 0)}

        removed, done = sweep(cut)
        assert removed == (0 if by_ttl else 12)  # the old lines
        assert ctx.compactor.streams_removed == 2  # pods 0-1
        assert {info.first_ts for info in store.removal.streams().values()} == {
            soon + i for i in (2, 3, 4)} | {kept + i for i in range(5, 12)}

        # a minute on: nothing has expired since. Nothing read of the lines, nothing written
        removed, done = sweep(cut + MINUTE)
        assert removed == 0
        assert [q for q in sent["queries"] if ".entries" in q] == []
        assert done == {} and sent["inserted"] == []

        # 10 minutes on: the 3 pods' lines in between have expired; only their rows change
        removed, done = sweep(cut + 10 * MINUTE)
        assert removed == (0 if by_ttl else 3)
        assert done == ({"streams": 1} if by_ttl else {"streams": 1, "entries": 1})
        assert sorted(sent["inserted"]) == sorted(
            [("streams", 3)] + ([] if by_ttl else [("rollups", 3)]))
        assert ctx.compactor.streams_removed == 2
        assert {info.first_ts for info in store.removal.streams().values()} == {
            kept + i for i in range(2, 12)}
        if not by_ttl:
            assert store.rows() == 10
            assert store.client.query(f"SELECT sum(lines) FROM {store.db}.rollups") == [[10]]
        r = c.get("/logstore/api/v1/query", params={
            "query": 'sum(count_over_time({app="short"}[4d]))', "time": str(NOW)})
        assert r.json()["data"]["result"][0]["value"][1] == "10"
        r = c.get("/logstore/api/v1/series", params={
            "match[]": '{app="short"}', "start": str(NOW - 4 * D), "end": str(NOW)})
        assert sorted(s["pod"] for s in r.json()["data"]) == sorted(
            f"p{i}" for i in range(2, 12))
