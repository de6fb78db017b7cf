"""Retention on ClickHouse by the tables' TTL (storage/clickhouse/ttl.py): the streams under
their tenant's longest period are left to the TTL, which ClickHouse applies in its merges (a
test forces one with OPTIMIZE ... FINAL); the compactor sends their lines no DELETE. The
rules are checked as ClickHouse reads them: which tenants' lines a merge removes, and when
a line's expiry falls."""

from __future__ import annotations

import msgspec
import pytest

from config import LimitsConfig, RetentionStream
from services.upkeep.retention_policy import rule_number
from storage.clickhouse import ttl
from storage.clickhouse.ttl import TtlPlan
from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body, run_copy_to_clickhouse
from tests.storage.test_clickhouse_backend import _client, _config
from tests.storage.test_clickhouse_retention import _mutations, _ttl_mutations

NS = 10**9
H = 3600 * NS
D = 24 * H
NOW = now_ns()


def _merge(store) -> None:
    """Have ClickHouse merge every part now: a merge is when a TTL removes lines."""
    for table in ("entries", "rollups"):
        store.client.command(f"OPTIMIZE TABLE {store.db}.{table} FINAL")


def _left(store) -> dict[str, list[str]]:
    rows = store.client.query(f"SELECT tenant, line FROM {store.db}.entries ORDER BY tenant, ts")
    out: dict[str, list[str]] = {}
    for tenant, line in rows:
        out.setdefault(tenant, []).append(line)
    return out


def _counted(store) -> dict[str, int]:
    return dict(store.client.query(f"SELECT tenant, sum(lines) FROM {store.db}.rollups "
                                   "GROUP BY tenant HAVING sum(lines) != 0"))


def _push(c, tenant: str | None, labels: dict, ages: list[int]) -> None:
    headers = {**JSON_HEADERS, **({"X-Scope-OrgID": tenant} if tenant else {})}
    r = c.post(PUSH, content=push_body(labels, [[str(NOW - age), f"{labels['pod']} {age // H}h"]
                                                 for age in sorted(ages, reverse=True)]),
               headers=headers)
    assert r.status_code == 204, r.text


def test_the_rules_name_each_period_s_tenants_and_the_rest_fall_under_the_default():
    plan = TtlPlan(2 * D, {"b": 10 * D, "c": None, "it's": 2 * D})
    minute_end = ttl.TABLES["entries"]
    assert plan.rules(minute_end) == [
        f"toDateTime(least({minute_end}, {ttl.LAST_SECOND - 172800})) + "
        "toIntervalSecond(172800) DELETE WHERE tenant IN ('it\\'s')",
        f"toDateTime(least({minute_end}, {ttl.LAST_SECOND - 864000})) + "
        "toIntervalSecond(864000) DELETE WHERE tenant IN ('b')",
        f"toDateTime(least({minute_end}, {ttl.LAST_SECOND - 172800})) + "
        "toIntervalSecond(172800) DELETE WHERE tenant NOT IN ('b', 'c', 'it\\'s')",
    ]
    assert TtlPlan(None, {"c": None}).rules(minute_end) == []
    assert TtlPlan(D, {}).rules("m") == [
        f"toDateTime(least(m, {ttl.LAST_SECOND - 86400})) + toIntervalSecond(86400) DELETE"]
    # a period in nanoseconds is rounded up to whole seconds: never removed earlier
    assert "toIntervalSecond(2)" in TtlPlan(NS + 1, {}).rules("m")[0]


def test_a_merge_removes_what_each_tenant_s_rule_says_and_the_rollups_follow(tmp_path):
    """Tenant a under the default 2 days, b under 10, c kept forever: lines of 1, 3 and 12
    days of age each, then the TTL applied and the parts merged."""
    cfg = {**_config(tmp_path), "auth_enabled": True,
           "limits_config": {"reject_old_samples": False}}
    with _client(cfg) as c:
        store = c.app.state.services.querier.store
        for tenant in ("a", "b", "c", "it's"):
            _push(c, tenant, {"pod": "p"}, [D, 3 * D, 12 * D])
        assert _counted(store) == {"a": 3, "b": 3, "c": 3, "it's": 3}
        _merge(store)
        assert {t: len(lines) for t, lines in _left(store).items()} == {
            "a": 3, "b": 3, "c": 3, "it's": 3}  # the state: no TTL yet, a merge keeps all

        plan = TtlPlan(2 * D, {"b": 10 * D, "c": None})
        assert store.removal.set_ttl(plan)
        assert not store.removal.set_ttl(plan)  # carried already: nothing sent
        assert ttl.applied(store.client, store.db, "") == plan.digest()
        _merge(store)

        assert _left(store) == {"a": ["p 24h"], "b": ["p 72h", "p 24h"],
                                "c": ["p 288h", "p 72h", "p 24h"], "it's": ["p 24h"]}
        assert _counted(store) == {"a": 1, "b": 2, "c": 3, "it's": 1}

        # no rule left (retention off): the TTL goes, and a merge keeps every line
        assert store.removal.set_ttl(TtlPlan(None, {}))
        engine = store.client.query("SELECT engine_full FROM system.tables WHERE "
                                    "database = {d:String} AND name = 'entries'",
                                    {"d": store.db})[0][0]
        assert " TTL " not in engine
        _push(c, "a", {"pod": "q"}, [12 * D])
        _merge(store)
        assert _left(store)["a"] == ["q 288h", "p 24h"]


@pytest.mark.parametrize("ts, expires", [
    # the minute 2026-01-01T00:00 ends at 00:01:00; a day of retention: 2026-01-02T00:01:00
    (1767225600 * NS, "2026-01-02 00:01:00"),
    (1767225600 * NS + 59 * NS + 999_999_999, "2026-01-02 00:01:00"),
    (1767225660 * NS, "2026-01-02 00:02:00"),
    (-NS, "1970-01-02 00:00:00"),  # the minute before 1970 ends at 1970
    (2**63 - 1, "2100-01-01 00:00:00"),  # far ahead: capped, not wrapped to the past
])
def test_a_line_expires_a_period_after_the_end_of_its_minute(tmp_path, ts, expires):
    with _client(_config(tmp_path)) as c:
        store = c.app.state.services.querier.store
        rule = TtlPlan(D, {}).rules(ttl.TABLES["entries"])[0].removesuffix(" DELETE")
        assert store.client.query(f"SELECT toString({rule}, 'UTC') FROM "
                                  f"(SELECT toInt64({ts}) AS ts)") == [[expires]]


def test_a_tenant_under_one_period_is_left_to_the_ttl(tmp_path):
    """Retention 2 days for every stream, turned on over lines already stored: the sweep
    sends no DELETE of lines (the TTL takes them), yet moves the streams' ranges and drops
    the pods with no line left, as the DELETEs did; the API hides the old lines before and
    after. A longer period in force afterwards is the TTL's at the next sweep, and with
    retention off again the TTL goes."""
    off = {**_config(tmp_path), "limits_config": {"reject_old_samples": False}}
    on = {**off, "limits_config": {"reject_old_samples": False, "retention_period": "2d"},
          "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"}}
    with _client(off) as c:
        store = c.app.state.services.querier.store
        for i in range(6):  # pods 0-1 only old lines, 2-5 old and recent
            _push(c, None, {"app": "a", "pod": f"p{i}"}, [3 * D] + ([H] if i >= 2 else []))
        assert store.rows() == 10  # the state: every line stored, no TTL
        assert ttl.applied(store.client, store.db, "") == ""

    def visible(c) -> tuple[list, str]:
        r = c.get("/logstore/api/v1/series", params={
            "match[]": '{app="a"}', "start": str(NOW - 4 * D), "end": str(NOW)})
        pods = sorted(s["pod"] for s in r.json()["data"])
        r = c.get("/logstore/api/v1/query", params={
            "query": 'sum(count_over_time({app="a"}[4d]))', "time": str(NOW)})
        result = r.json()["data"]["result"]
        return pods, result[0]["value"][1] if result else "none"

    with _client(on) as c:
        ctx = c.app.state.services
        store = ctx.querier.store
        assert c.blocking_portal.call(ctx.compactor.run_once) == 0  # no line deleted
        plan = ctx.compactor.policy.ttl_plan(0)
        assert plan.period_of("fake") == 2 * D
        assert ttl.applied(store.client, store.db, "") == plan.digest()
        # no DELETE of entries; the 2 emptied pods dropped with their postings together, the
        # other streams' ranges moved (by each sweep: the one at start-up may have run too);
        # the TTL put on both tables' parts
        done = _mutations(store)
        assert "entries" not in done and done["stream_labels"] == 1 and done["streams"] >= 2
        assert _ttl_mutations(store) == {"entries": 1, "rollups": 1}
        _merge(store)
        assert store.rows() == 4  # the TTL took the old lines
        assert _counted(store) == {"fake": 4}
        assert visible(c) == (["p2", "p3", "p4", "p5"], "4")
        c.blocking_portal.call(ctx.compactor.run_once)
        assert _ttl_mutations(store) == {"entries": 1, "rollups": 1}  # the same plan: kept

        # three days on for the compactor (ClickHouse's clock, the TTL's, stays): the 4
        # recent lines have expired too, and are still on disk. The sweep leaves them to
        # the TTL and drops their streams.
        ctx.compactor.policy.clock = lambda: NOW + 3 * D
        assert _mutations(store)["stream_labels"] == 1
        c.blocking_portal.call(ctx.compactor.run_once)
        done = _mutations(store)
        assert "entries" not in done and done["stream_labels"] == 2
        assert store.rows() == 4
        assert visible(c)[0] == []
        ctx.compactor.policy.clock = now_ns

        # the tenant's own limits now keep 30 days (runtime overrides replace the mapping)
        ctx.compactor.policy.limits.tenants = {"fake": msgspec.structs.replace(
            LimitsConfig(), reject_old_samples=False, retention_period=30 * D)}
        changes = ctx.compactor.ttl_changes
        c.blocking_portal.call(ctx.compactor.run_once)
        assert ctx.compactor.ttl_changes == changes + 1
        _push(c, None, {"app": "a", "pod": "p9"}, [3 * D])
        _merge(store)
        assert store.rows() == 5  # 3 days old, kept under 30 days
        assert visible(c) == (["p9"], "1")

    with _client(off) as c:
        ctx = c.app.state.services
        store = ctx.querier.store
        c.blocking_portal.call(ctx.compactor.run_once)
        assert ttl.applied(store.client, store.db, "") == ""
        _push(c, None, {"app": "a", "pod": "p10"}, [40 * D])
        _merge(store)
        assert store.rows() == 6  # no TTL: kept


def test_copy_to_clickhouse_takes_a_ttl_away_so_no_copied_line_is_dropped(tmp_path):
    """Lines 3 days old in SQLite (not yet removed there), ClickHouse tables under a 2-day
    TTL: inserted as they are, they would be dropped on the way in and the copy's counts
    differ. The copy takes the TTL away first; a compactor's sweep puts it back."""
    retention = {"limits_config": {"reject_old_samples": False, "retention_period": "2d"},
                 "compactor": {"retention_enabled": True}}
    with _client({**_config(tmp_path), **retention}) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.run_once)
        store = ctx.querier.store
        assert ttl.applied(store.client, store.db, "") != ""  # the state: a TTL in force
    sqlite_cfg = {"common": {"path_prefix": str(tmp_path / "data")},
                  "limits_config": {"reject_old_samples": False}}
    with _client(sqlite_cfg) as c:
        _push(c, None, {"pod": "p"}, [3 * D, 3 * D - NS, H])
    out = run_copy_to_clickhouse({
        **sqlite_cfg, "storage": {"clickhouse": {"url": f"chdb://{tmp_path / 'ch'}"}}},
        tmp_path / "copy.yaml")
    assert "took the tables' retention TTL away while copying" in out.stdout, out.stdout
    assert "verified: 3 lines in both" in out.stdout, out.stdout
    with _client({**_config(tmp_path), **retention}) as c:
        ctx = c.app.state.services
        store = ctx.querier.store
        c.blocking_portal.call(ctx.compactor.run_once)
        assert ttl.applied(store.client, store.db, "") == \
            ctx.compactor.policy.ttl_plan(ctx.compactor.delay).digest()


def _entry_deletes(store) -> int:
    return _mutations(store).get("entries", 0)


def test_lines_of_a_shorter_stream_rule_are_left_to_the_ttl_of_that_rule(tmp_path):
    """A tenant keeps 30 days, `{app="debug"}` 2 days: each line is stored with the rule it
    falls under, and the TTL removes a rule's lines after its period, so the sweep sends
    no DELETE for them. When a stream stored under that rule is governed by a longer one
    later (a new rule of higher priority), the rule's TTL keeps the longest such period and
    the other streams of the rule are deleted by DELETEs again."""
    debug = {"selector": '{app="debug"}', "priority": 1, "period": "2d"}
    cfg = {**_config(tmp_path),
           "limits_config": {"reject_old_samples": False, "retention_period": "30d",
                             "retention_stream": [debug]},
           "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"}}
    with _client(cfg) as c:
        ctx = c.app.state.services
        c.blocking_portal.call(ctx.compactor.stop)  # the test runs the sweeps
        store = ctx.querier.store
        policy = ctx.compactor.policy
        for pod, app in (("d1", "debug"), ("d2", "debug"), ("w", "web")):
            _push(c, None, {"app": app, "pod": pod}, [3 * D, H])
        number = rule_number("fake", '{app="debug"}')
        stored = dict(store.client.query(
            f"SELECT stream_id, groupUniqArray(rule) FROM {store.db}.entries "
            "GROUP BY stream_id"))
        # the state: every line on disk, the debug pods' stored under the rule
        assert sorted(map(sorted, stored.values())) == [[0], [number], [number]]
        assert store.rows() == 6 and _entry_deletes(store) == 0

        assert c.blocking_portal.call(ctx.compactor.run_once) == 0
        assert _entry_deletes(store) == 0
        engine = store.client.query("SELECT engine_full FROM system.tables WHERE "
                                    "database = {d:String} AND name = 'entries'",
                                    {"d": store.db})[0][0]
        assert f"WHERE rule IN ({number})" in engine
        _merge(store)
        assert sorted(_left(store)["fake"]) == ["d1 1h", "d2 1h", "w 1h", "w 72h"]

        # pod d1 is now kept 10 days by a rule of its own; its lines stored under the
        # debug rule must stay as long, so the debug rule's TTL keeps 10 days from the next
        # sweep on, and an expired line of d2 stored after it goes by DELETE
        d1 = {"selector": '{pod="d1"}', "priority": 5, "period": "10d"}
        policy.limits.defaults = msgspec.structs.replace(
            policy.limits.defaults, retention_stream=[
                RetentionStream(selector=r["selector"], priority=r["priority"],
                                period=int(r["period"][:-1]) * D) for r in (debug, d1)])
        assert c.blocking_portal.call(ctx.compactor.run_once) == 0
        plan = policy.ttl_plan(0, store.removal.streams())
        assert plan.rules_by_number == {number: 10 * D}
        assert ttl.applied(store.client, store.db, "") == plan.digest()
        for pod in ("d1", "d2"):
            _push(c, None, {"app": "debug", "pod": pod}, [3 * D - H])
        assert store.rows() == 6  # the state: both lines kept on the way in
        assert c.blocking_portal.call(ctx.compactor.run_once) == 1
        assert _entry_deletes(store) == 1
        _merge(store)
        assert sorted(_left(store)["fake"]) == ["d1 1h", "d1 71h", "d2 1h", "w 1h", "w 72h"]
        r = c.get("/logstore/api/v1/query", params={
            "query": 'sum by (pod) (count_over_time({app=~".+"}[4d]))', "time": str(NOW)})
        assert {s["metric"]["pod"]: s["value"][1] for s in r.json()["data"]["result"]} == {
            "d1": "2", "d2": "1", "w": "2"}

        # eleven days on for the compactor (ClickHouse's clock, the TTL's, stays): every
        # debug line has expired and is still on disk; d1's are the TTL's (10 days under
        # both of its rules), d2's goes by DELETE
        policy.clock = lambda: NOW + 11 * D
        deletes = _entry_deletes(store)
        assert c.blocking_portal.call(ctx.compactor.run_once) == 1
        assert _entry_deletes(store) == deletes + 1
        assert sorted(_left(store)["fake"]) == ["d1 1h", "d1 71h", "w 1h", "w 72h"]
