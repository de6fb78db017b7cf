"""Per-minute rollups on ClickHouse (storage/clickhouse/rollups.py): counts on whole minutes
are answered from the `rollups` table, and stay those of the stored lines when a delete
request removes some, after /flush, and in a database written before the rollups existed
(migration 0002 fills them from the entries).

Which table a statement read is seen by recording the statements the store's client sends
to ClickHouse (they still run there); the answers are the user's JSON."""

from __future__ import annotations

import re

import pytest

import storage.clickhouse.store as store_module
from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body, without_retention_rules
from tests.storage.test_clickhouse_backend import _client, _config

NS = 10**9
MIN = 60 * NS
# six whole minutes at the start of an hour (one chunk a stream), hours back: stream a has
# 10 lines a minute (one exactly on the minute), stream b 3, one of which says "drop"
T0 = (now_ns() - 3 * 3600 * NS) // (3600 * NS) * 3600 * NS
A_LINES = [[str(T0 + m * MIN + i * 6 * NS), f"a {m} {i}"] for m in range(6) for i in range(10)]
B_LINES = [[str(T0 + m * MIN + s * NS), f"b {m} {'drop' if s == 20 else 'keep'}"]
           for m in range(6) for s in (10, 20, 30)]
STEPS = [T0 + k * MIN for k in range(1, 6)]   # each step's [1m] window is a whole minute
COUNT = 'sum by (who) (count_over_time({app="r"}[1m]))'


def _push(c) -> None:
    for who, lines in (("a", A_LINES), ("b", B_LINES)):
        r = c.post(PUSH, content=push_body({"app": "r", "who": who}, lines),
                   headers=JSON_HEADERS)
        assert r.status_code == 204, r.text


def _counts(c, query: str = COUNT, step: int = 60) -> dict:
    r = c.get("/logstore/api/v1/query_range", params={
        "query": query, "start": str(STEPS[0]), "end": str(STEPS[-1]), "step": str(step)})
    assert r.status_code == 200, r.text
    return {s["metric"]["who"]: s["values"] for s in r.json()["data"]["result"]}


def _index(c) -> tuple[dict, list]:
    span = {"start": str(T0), "end": str(T0 + 6 * MIN - 1)}
    stats = c.get("/logstore/api/v1/index/stats", params={"query": '{app="r"}', **span})
    volume = c.get("/logstore/api/v1/index/volume_range", params={
        "query": '{app="r"}', "step": "60", "targetLabels": "who", **span})
    assert stats.status_code == 200 and volume.status_code == 200, (stats.text, volume.text)
    return stats.json(), volume.json()["data"]["result"]


def _series(per_step: dict[str, int]) -> dict:
    return {who: [[t // NS, str(n)] for t in STEPS] for who, n in per_step.items()}


class _Statements:
    """The statements the store's client runs, recorded on their way to ClickHouse."""

    def __init__(self, monkeypatch, store):
        self.sql: list[str] = []
        for name in ("query", "query_arrow"):
            monkeypatch.setattr(store.client, name, self._recorded(getattr(store.client, name)))

    def _recorded(self, run):
        def query(sql, params=None, settings=None):
            self.sql.append(sql)
            return run(sql, params, settings)
        return query

    def tables(self) -> set[str]:
        """The log tables read (rollups, entries), each entries read that is not a
        lookup of single timestamps named apart."""
        out = set()
        for sql in self.sql:
            for table in re.findall(r"FROM \w+\.(rollups|entries)\b", sql):
                out.add("entries at points" if table == "entries"
                        and "ts IN {at:" in sql else table)
        return out


def test_counts_on_whole_minutes_are_read_from_the_rollups(tmp_path, monkeypatch):
    with _client(_config(tmp_path)) as c:
        _push(c)
        store = c.app.state.services.querier.store
        # the state: the materialized view summed every pushed line into the rollups
        assert store.client.query(
            f"SELECT sum(lines) FROM {store.db}.rollups") == [[len(A_LINES) + len(B_LINES)]]
        seen = _Statements(monkeypatch, store)
        assert _counts(c) == _series({"a": 10, "b": 3})
        # the lines exactly on a step are moved to the bucket they end: looked up one
        # timestamp at a time, the minutes themselves never read from the entries
        assert seen.tables() == {"rollups", "entries at points"}
        seen.sql.clear()
        stats, volume = _index(c)
        assert stats == {"streams": 2, "chunks": 2, "entries": 78,
                         "bytes": sum(len(v[1]) for v in A_LINES + B_LINES)}
        assert [(v["metric"], len(v["values"])) for v in volume] == [
            ({"who": "a"}, 6), ({"who": "b"}, 6)]
        assert seen.tables() == {"rollups"}
        seen.sql.clear()
        # a step that is not a whole number of minutes: counted from the entries, the same
        # totals
        thirty = _counts(c, 'sum by (who) (count_over_time({app="r"}[30s]))', 30)
        assert seen.tables() == {"entries"}
        # the windows cover (T0 + 30s, T0 + 5m]
        assert {who: sum(int(v) for _, v in vals) for who, vals in thirty.items()} == {
            "a": 45, "b": 12}


def test_counts_stay_those_of_the_lines_after_a_delete_request_is_processed(tmp_path):
    cfg = {**_config(tmp_path),
           "compactor": {"retention_enabled": True, "delete_request_cancel_period": "0s"}}
    with _client(cfg) as c:
        _push(c)
        r = c.post("/logstore/api/v1/delete", params={
            "query": '{who="b"} |= "drop"', "start": str(T0 // NS),
            "end": str((T0 + 6 * MIN) // NS)})
        assert r.status_code == 204, r.text
        # pending: the reads take the picked lines out of what storage counts
        assert [q["status"] for q in c.get("/logstore/api/v1/delete").json()] == ["received"]
        pending = (_counts(c), _index(c))
        assert pending[0] == _series({"a": 10, "b": 2})
        assert pending[1][0]["entries"] == 72
        c.blocking_portal.call(c.app.state.services.compactor.run_once)
        # processed: the lines are gone from the entries and the reads no longer filter
        assert [q["status"] for q in c.get("/logstore/api/v1/delete").json()] == ["processed"]
        store = c.app.state.services.querier.store
        assert store.rows() == 72
        assert (_counts(c), _index(c)) == pending
        token = c.app.state.services.config.server.admin_token
        r = c.post("/flush", headers={"Authorization": f"Bearer {token}"} if token else {})
        assert r.status_code == 204
        # merged: a row per minute and metadata, the deleted lines subtracted
        assert store.client.query(
            f"SELECT count(), sum(lines) FROM {store.db}.rollups") == [[12, 72]]
        assert (_counts(c), _index(c)) == pending


def test_a_database_written_before_the_rollups_answers_the_same_after_the_upgrade(
        tmp_path, monkeypatch):
    cfg = _config(tmp_path)
    first = [m for m in store_module.migration_files() if m[0] == 1]
    with monkeypatch.context() as m:
        m.setattr(store_module, "migration_files", lambda: first)
        with _client(cfg) as c:
            store = c.app.state.services.querier.store
            # as a release of schema 0001 wrote: no retention rule of a line or stream
            m.setattr(store.client, "insert", without_retention_rules(store.client.insert))
            _push(c)
            # the state: schema 0001 only, every line stored, no rollups table
            assert store.client.query(f"SELECT version FROM {store.db}.schema_version") \
                == [[1]]
            assert store.client.query(
                "SELECT count() FROM system.tables WHERE database = {d:String} "
                "AND name = 'rollups'", {"d": store.db}) == [[0]]
            assert store.rows() == 78
    with _client(cfg) as c:
        store = c.app.state.services.querier.store
        assert store.client.query(
            f"SELECT version FROM {store.db}.schema_version ORDER BY version") == [[1], [2], [3]]
        assert _counts(c) == _series({"a": 10, "b": 3})
        stats, _ = _index(c)
        assert stats["entries"] == 78
        # lines pushed after the upgrade are added by the view, once
        more = [[str(T0 + m * MIN + 45 * NS), f"b {m} late"] for m in range(6)]
        assert c.post(PUSH, content=push_body({"app": "r", "who": "b"}, more),
                      headers=JSON_HEADERS).status_code == 204
        assert _counts(c) == _series({"a": 10, "b": 4})


@pytest.mark.parametrize("points", [
    [T0 - 1 + k * MIN for k in range(7)],                       # volume's buckets
    [T0 + k * 2 * MIN for k in range(4)],                       # a grid on minutes
    [T0 + 17 * NS, T0 + 17 * NS + 3 * MIN],                     # an instant query's window
    [T0 + 5 * NS, T0 + 9 * NS, T0 + 2 * MIN + 3, T0 + 5 * MIN],  # uneven, two in a minute
])
def test_window_counts_from_the_rollups_equal_the_entries(tmp_path, points):
    """The engine's counts (`Reader.window_counts`, `grouped_counts`) on every shape the
    rollups answer equal those counted from the entries."""
    from logql.reading import add_to_groups
    from storage.clickhouse import rollups

    with _client(_config(tmp_path)) as c:
        _push(c)
        store = c.app.state.services.querier.store
        reader = store.reader(None, None)
        sids = list(reader.select_streams("fake", [], T0 - MIN, T0 + 7 * MIN))
        assert len(sids) == 2 and rollups.plan(points) is not None  # the state
        per_stream = reader.window_counts(sids, points, True)
        groups = {sids[0]: 0, sids[1]: 0}
        grouped = reader.grouped_counts(groups, points, True)
        # the same reader with no plan the rollups answer: what it counted before them
        with pytest.MonkeyPatch.context() as m:
            m.setattr(rollups, "plan", lambda _: None)
            want = reader.window_counts(sids, points, True)
        assert per_stream == want
        assert grouped == add_to_groups({}, want, groups, len(points) - 1)
