"""Retention: per-stream periods (retention_stream rules, retention_period), expired lines
gone from every read at once (log queries, rollup counts, cut buckets), and from disk after
the compactor's sweep; the clock is injected, nothing sleeps."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.helpers import HEAD_ROWS, JSON_HEADERS, PUSH, SEALED_BLOCKS, push_body

H = 3600 * 10**9
D = 24 * H
T0 = 1_700_000_000 * 10**9
CONFIG = {
    "limits_config": {
        "reject_old_samples": False,
        "retention_period": "10d",
        "retention_stream": [
            {"selector": '{app="a"}', "priority": 1, "period": "2d"},
            {"selector": '{app="b"}', "priority": 1, "period": "6d"},
            # same priority, longer selector: wins over {app="b"}
            {"selector": '{app="b", env="x"}', "priority": 1, "period": "4d"},
            # lower priority: never wins over the rules above
            {"selector": '{env="x"}', "priority": 0, "period": "1d"},
        ],
    },
    "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"},
}
STREAMS = [{"app": "a"}, {"app": "b", "env": "x"}, {"app": "b", "env": "y"}, {"app": "c"}]
PERIOD = {"a": 2 * D, "bx": 4 * D, "by": 6 * D, "c": 10 * D}


def key(labels: dict) -> str:
    return labels["app"] + labels.get("env", "")


def stamps() -> list[int]:
    # hourly over 12 days, 13 s past the hour (never on a window edge)
    return [T0 - k * H + 13 * 10**9 for k in range(12 * 24)]


@pytest.fixture
def setup(make_client):
    client = make_client(CONFIG)
    ctx = client.app.state.services
    # the sweeps are the tests' own: the one the compactor starts with, on the real clock,
    # could otherwise land between two pushes and remove a stream the test expects to see
    client.blocking_portal.call(ctx.compactor.stop)
    clock = {"now": T0 + 30 * 60 * 10**9 + 7 * 10**9}  # mid-hour: cutoffs cut buckets
    ctx.retention.clock = lambda: clock["now"]
    for labels in STREAMS:
        values = [[str(ts), f"{key(labels)} {ts}"] for ts in stamps()]
        assert client.post(PUSH, content=push_body(labels, values),
                           headers=JSON_HEADERS).status_code == 204
    return client, ctx, clock


def visible(now: int) -> dict[str, list[int]]:
    return {key(l): [ts for ts in stamps() if ts >= now - PERIOD[key(l)]] for l in STREAMS}


def log_lines(client, now: int) -> dict[str, list[int]]:
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app=~".+"}', "start": str(max(T0 - 13 * D, now - 30 * D)), "end": str(now),
        "limit": "5000",
        "direction": "forward"})
    assert r.status_code == 200, r.text
    out: dict[str, list[int]] = {}
    for s in r.json()["data"]["result"]:
        out[key(s["stream"])] = [int(ts) for ts, _ in s["values"]]
    return out


def hourly_counts(client, now: int, rng: str) -> dict[str, dict[int, int]]:
    end = now - now % H
    r = client.get("/logstore/api/v1/query_range", params={
        "query": f'sum by (app, env) (count_over_time({{app=~".+"}}[{rng}]))',
        "start": str(end - 13 * D), "end": str(end), "step": "3600"})
    assert r.status_code == 200, r.text
    out: dict[str, dict[int, int]] = {}
    for s in r.json()["data"]["result"]:
        out[key(s["metric"])] = {int(t) * 10**9: int(v) for t, v in s["values"]}
    return out


def expected_counts(now: int, width: int) -> dict[str, dict[int, int]]:
    end = now - now % H
    out: dict[str, dict[int, int]] = {}
    for name, kept in visible(now).items():
        series = {}
        for t in range(end - 13 * D, end + 1, H):
            n = sum(1 for ts in kept if t - width < ts <= t)
            if n:
                series[t] = n
        if series:
            out[name] = series
    return out


def check_reads(client, now: int) -> None:
    want = {k: v for k, v in visible(now).items() if v}
    got = log_lines(client, now)
    assert {k: len(v) for k, v in got.items()} == {k: len(v) for k, v in want.items()}
    assert got == {k: sorted(v) for k, v in want.items()}
    # a 90m range: buckets with edges mid-minute; 1h: the minute grid (grouped rollups)
    assert hourly_counts(client, now, "90m") == expected_counts(now, 90 * 60 * 10**9)
    assert hourly_counts(client, now, "1h") == expected_counts(now, H)


def test_rules_choose_the_period():
    from config import config_from_dict
    from services.upkeep.retention_policy import RetentionPolicy
    from services.runtime.limits import Limits

    cfg = config_from_dict(CONFIG)
    policy = RetentionPolicy(cfg.compactor.retention_enabled, Limits(cfg.limits_config))
    assert {key(l): policy.period_of("fake", l) for l in STREAMS} == PERIOD
    assert policy.period_of("fake", {"app": "z", "env": "x"}) == 1 * D


def test_expired_lines_leave_reads_at_once_and_disk_at_the_sweep(setup):
    client, ctx, clock = setup
    db = ctx.db.path
    check_reads(client, clock["now"])
    assert client.post("/flush").status_code == 204  # sealed: blocks straddle the cutoffs
    check_reads(client, clock["now"])

    removed = client.blocking_portal.call(ctx.compactor.run_once)
    assert removed > 0
    check_reads(client, clock["now"])
    conn = sqlite3.connect(db)
    total = conn.execute("SELECT count(*) FROM entries").fetchone()[0] + \
        conn.execute("SELECT coalesce(sum(rows), 0) FROM blocks").fetchone()[0]
    conn.close()
    assert total < len(stamps()) * len(STREAMS) - removed + 1
    assert sum(len(v) for v in visible(clock["now"]).values()) <= total

    # three days later: {app="a"} (2d) has nothing left: it leaves labels and series at
    # once, and its stream leaves the disk at the sweep
    clock["now"] += 3 * D
    rng = {"start": str(T0 - 13 * D), "end": str(clock["now"])}
    check_reads(client, clock["now"])
    for _ in range(2):
        r = client.get("/logstore/api/v1/label/app/values", params=rng)
        assert r.json()["data"] == ["b", "c"]
        r = client.get("/logstore/api/v1/series", params={"match[]": '{app=~"a|c"}', **rng})
        assert [s["app"] for s in r.json()["data"]] == ["c"]
        client.blocking_portal.call(ctx.compactor.run_once)
        check_reads(client, clock["now"])
    assert "logstore_compactor_retention_lines_removed_total" in client.get("/metrics").text


def test_new_lines_of_a_removed_stream_are_stored_again(setup):
    client, ctx, clock = setup
    clock["now"] += 20 * D  # everything expired
    client.blocking_portal.call(ctx.compactor.run_once)
    conn = sqlite3.connect(ctx.db.path)
    assert conn.execute("SELECT count(*) FROM streams").fetchone()[0] == 0
    conn.close()
    ts = clock["now"] - H
    r = client.post(PUSH, content=push_body({"app": "a"}, [[str(ts), "again"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 204
    got = log_lines(client, clock["now"])
    assert got == {"a": [ts]}


def test_retention_off_keeps_everything(make_client):
    client = make_client({**CONFIG, "compactor": {"retention_enabled": False}})
    labels = {"app": "a"}
    values = [[str(ts), "x"] for ts in stamps()]
    client.post(PUSH, content=push_body(labels, values), headers=JSON_HEADERS)
    ctx = client.app.state.services
    ctx.retention.clock = lambda: T0 + 30 * D
    assert client.blocking_portal.call(ctx.compactor.run_once) == 0
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="a"}', "start": str(T0 - 13 * D), "end": str(T0 + D), "limit": "5000"})
    assert sum(len(s["values"]) for s in r.json()["data"]["result"]) == len(stamps())


def test_bad_retention_rule_is_refused(tmp_path):
    from config import ConfigError
    from tests.conftest import make_config

    with pytest.raises(ConfigError, match=r"limits_config.retention_stream\[0\].selector"):
        make_config(tmp_path, {"limits_config": {"retention_stream": [
            {"selector": '{app="a"', "period": "1d"}]}})


def test_a_sweep_commits_per_batch_of_streams_not_per_stream(make_client):
    """Issue 22: a sweep was a read and two writer jobs (two commits) per stream with
    anything old, every sweep, also for a stream whose only old block straddles the cutoff
    and is kept whole. With 600 streams: a few commits, and none once nothing is due."""
    n = 600
    client = make_client({
        "limits_config": {"reject_old_samples": False, "retention_period": "3d"},
        "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"}})
    ctx = client.app.state.services
    client.blocking_portal.call(ctx.compactor.stop)
    clock = {"now": T0}
    ctx.retention.clock = lambda: clock["now"]
    cutoff = T0 - 3 * D  # 13 min 20 s past an hour: the lines around it share a window
    minute = 60 * 10**9
    body = json.dumps({"streams": [
        {"stream": {"job": "sweep", "pod": f"pod-{i}"},
         "values": [[str(T0 - 5 * D + i), f"gone {i}"], [str(cutoff - 10 * minute + i), "hidden"],
                    [str(cutoff + 10 * minute + i), f"kept {i}"]]} for i in range(n)]})
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    assert client.post("/flush").status_code == 204
    conn = sqlite3.connect(ctx.db.path)
    # the state the test names: every line sealed, a block per pod straddling the cutoff
    assert conn.execute(f"SELECT {HEAD_ROWS}, {SEALED_BLOCKS}").fetchone() == (0, 2 * n)
    assert conn.execute("SELECT count(*) FROM blocks WHERE min_ts < ? AND max_ts >= ?",
                        (cutoff, cutoff)).fetchone()[0] == n

    def sweep() -> tuple[int, int]:
        before = ctx.db.commits
        removed = client.blocking_portal.call(ctx.compactor.run_once)
        return removed, ctx.db.commits - before

    removed, commits = sweep()
    assert removed == n
    assert commits <= 8, commits                 # 600 streams: 1,200 before
    assert conn.execute(f"SELECT {SEALED_BLOCKS}").fetchone()[0] == n
    clock["now"] += 5 * minute                   # the cutoff still inside every kept block
    assert sweep() == (0, 1)                     # the space reclaim's job alone
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{job="sweep"}', "start": str(T0 - 6 * D), "end": str(T0 + D),
        "limit": "5000"})
    lines = [v[1] for s in r.json()["data"]["result"] for v in s["values"]]
    assert sorted(lines) == sorted(f"kept {i}" for i in range(n))
    conn.close()
