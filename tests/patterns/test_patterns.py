"""Patterns (spec/http-api.md section 7) mined from the loghub OpenSSH set at its own
timestamps: the known top templates with their ground-truth counts, counts per step, patterns
that work as `|>` filters for the lines they claim, and templates that survive a restart."""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime, timezone

import pytest

from services.patterns.mining import WorkerMiners

from tests.conftest import loghub_lines
from tests.helpers import (JSON_HEADERS, PUSH, process_ended, push_body, query_worker_pids,
                           until)

H = 3600 * 10**9
PATTERNS = "/logstore/api/v1/patterns"
CONFIG = {"limits_config": {"reject_old_samples": False},
          "pattern_ingester": {"enabled": True, "retain_for": "30d"}}
HEAD = "<_> LabSZ sshd[<_>]: "
# ground truth (OpenSSH_2k.log_structured.csv): template -> lines
TOP = {
    HEAD + "Received disconnect from <_>: <_>: Bye Bye [preauth]": 413,     # E24
    HEAD + "pam_unix(sshd:auth): authentication failure; logname= uid=<_> euid=<_> "
           "tty=ssh ruser= rhost=<_>  user=<_>": 384,                       # E20
    HEAD + "pam_unix(sshd:auth): check pass; user unknown": 135,            # E21
    HEAD + "Invalid user <_> from <_>": 113,                                # E13
    HEAD + "input_userauth_request: invalid user <_> [preauth]": 113,       # E12
}


def entries() -> list[list[str]]:
    out = []
    for line in loghub_lines("OpenSSH"):
        dt = datetime.strptime("2023 " + line[:15], "%Y %b %d %H:%M:%S")
        out.append([str(int(dt.replace(tzinfo=timezone.utc).timestamp()) * 10**9), line])
    return out


def push_all(client, values) -> None:
    for i in range(0, len(values), 500):
        body = push_body({"job": "openssh"}, values[i:i + 500])
        assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204


def mined(client) -> None:
    service = client.app.state.services.patterns
    client.blocking_portal.call(service.catch_up)


def patterns(client, values, step: str = "1h") -> list[dict]:
    lo, hi = int(values[0][0]), int(values[-1][0])
    r = client.get(PATTERNS, params={"query": '{job="openssh"}', "start": str(lo),
                                     "end": str(hi + 1), "step": step})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "success"
    return r.json()["data"]


def totals(data: list[dict]) -> dict[str, int]:
    return {d["pattern"]: sum(n for _, n in d["samples"]) for d in data}


@pytest.fixture(scope="module")
def values():
    return entries()


@pytest.fixture(params=[0, pytest.param(2, marks=pytest.mark.query_workers)],
                ids=["mined-in-server", "mined-in-worker"])
def config(request):
    """Every test twice: the templates held and mined on the server's reader threads, and
    in a query worker process (services/patterns/mining.py)."""
    return {**CONFIG, "querier": {"worker_processes": request.param}}


def test_top_templates_with_their_counts(make_client, values, config):
    c = make_client(config)
    push_all(c, values)
    mined(c)
    # the state named: the templates live and were mined in a worker, or in this process
    miners = c.app.state.services.patterns.miners
    assert isinstance(miners, WorkerMiners) == (config["querier"]["worker_processes"] > 0)
    assert miners.templates > 0
    data = patterns(c, values)
    got = totals(data)
    for pattern, count in TOP.items():
        assert got.get(pattern) == count, pattern
    assert sum(got.values()) == len(values)
    levels = {d["pattern"]: d["level"] for d in data}
    assert levels[next(iter(TOP))] == "unknown"
    assert {levels[p] for p in levels if ": error: " in p} == {"error"}
    # ordered by count; samples per step, ascending, on step boundaries
    assert list(got.values()) == sorted(got.values(), reverse=True)
    for d in patterns(c, values, step="10m"):
        times = [t for t, _ in d["samples"]]
        assert times == sorted(times) and all(t % 600 == 0 for t in times)
    assert totals(patterns(c, values, step="10m")) == got


def test_a_pattern_as_a_filter_returns_the_lines_it_claims(make_client, values, config):
    c = make_client(config)
    push_all(c, values)
    mined(c)
    hi = int(values[-1][0]) + 1
    for d in patterns(c, values)[:8]:
        claimed = sum(n for _, n in d["samples"])
        r = c.get("/logstore/api/v1/query", params={
            "query": f'sum(count_over_time({{job="openssh"}} |> {json.dumps(d["pattern"])} '
                     f'[30d]))', "time": str(hi)})
        assert r.status_code == 200, r.text
        matched = int(r.json()["data"]["result"][0]["value"][1])
        assert matched >= claimed, d["pattern"]  # `|>` may also match lines of other templates
    for pattern, count in TOP.items():
        r = c.get("/logstore/api/v1/query", params={
            "query": f'sum(count_over_time({{job="openssh"}} |> {json.dumps(pattern)} [30d]))',
            "time": str(hi)})
        assert int(r.json()["data"]["result"][0]["value"][1]) == count, pattern


@pytest.mark.seals_itself
def test_patterns_survive_a_restart_and_keep_learning(make_client, tmp_path, values, config):
    data_dir = tmp_path / "kept"
    c = make_client(config, data_dir=data_dir)
    half = len(values) // 2
    push_all(c, values[:half])
    assert c.post("/flush").status_code == 204  # sealed: the miner had them first
    before = totals(patterns(c, values))
    assert sum(before.values()) == half
    c.__exit__(None, None, None)

    c = make_client(config, data_dir=data_dir)
    assert totals(patterns(c, values)) == before
    push_all(c, values[half:])
    mined(c)
    after = totals(patterns(c, values))
    assert sum(after.values()) == len(values)
    for pattern, count in TOP.items():
        assert after.get(pattern) == count, pattern


def test_disabled_and_errors(make_client, tmp_path, config):
    off = make_client({}, data_dir=tmp_path / "off")
    assert off.get(PATTERNS, params={"query": '{job="x"}'}).status_code == 404
    c = make_client(config, data_dir=tmp_path / "on")
    r = c.get(PATTERNS, params={"query": '{job="x"} |= "a"'})
    assert (r.status_code, r.text) == (400, "only label matchers are supported")
    r = c.get(PATTERNS, params={"query": '{job="x"}', "step": "-1"})
    assert r.status_code == 400
    assert c.get(PATTERNS, params={"query": '{job="x"}'}).json() == {"status": "success",
                                                                     "data": []}


def test_deleted_lines_leave_the_counts_at_once_and_after_compaction(make_client, values, config):
    c = make_client({**config, "compactor": {"retention_enabled": True}})
    push_all(c, values)
    mined(c)
    invalid = HEAD + "Invalid user <_> from <_>"
    assert totals(patterns(c, values))[invalid] == 113
    lo, hi = int(values[0][0]), int(values[-1][0])
    deletions = c.app.state.services.deletions
    deletions.clock = lambda: hi + 48 * H
    r = c.post("/logstore/api/v1/delete", params={
        "query": '{job="openssh"} |~ "Invalid user .* from"', "start": str(lo // 10**9),
        "end": str(hi // 10**9 + 1)})
    assert r.status_code == 204, r.text
    after = totals(patterns(c, values))
    assert invalid not in after
    assert sum(after.values()) == len(values) - 113
    deletions.clock = lambda: hi + 73 * H  # past the cancel period: off the disk
    c.blocking_portal.call(c.app.state.services.compactor.run_once)
    assert c.get("/logstore/api/v1/delete").json()[0]["status"] == "processed"
    assert totals(patterns(c, values)) == after


@pytest.mark.seals_itself
def test_the_head_is_sealed_while_pushes_keep_coming(make_client, values, config):
    """The sealer waits for the miner; pushes arriving without pause must not keep it
    waiting: what was pushed before the round is mined and sealed, the rest waits."""
    import asyncio

    from services.ingest.prepare import RawStream

    c = make_client({**config, "storage": {"block_max_rows": 100}})
    ctx = c.app.state.services
    sealer, ingester = ctx.sealer, ctx.ingester
    first = values[:1000]
    push_all(c, first)

    async def round_under_pushes() -> tuple[int, int]:
        stop = asyncio.Event()
        pushed = [0]

        async def keep_pushing() -> None:
            ts = int(values[-1][0])
            while not stop.is_set():
                ts += 1
                await ingester.push("fake", [RawStream([("job", "openssh")],
                                                       [(ts, "sshd: again", None)])])
                pushed[0] += 1

        pusher = asyncio.create_task(keep_pushing())
        try:
            async with asyncio.timeout(120):
                sealed = await sealer.seal_due()
        finally:
            stop.set()
            await pusher
        return sealed, pushed[0]

    sealed, pushed = c.blocking_portal.call(round_under_pushes)
    assert pushed > 0 and sealed > 0
    last = int(first[-1][0])
    left = ctx.db.read_sync(lambda conn: conn.execute(
        "SELECT count(*) FROM entries WHERE ts <= ?", (last,)).fetchone()[0] + conn.execute(
        "SELECT count(*) FROM blocks WHERE flags & 4 AND min_ts <= ?", (last,)).fetchone()[0])
    assert left == 0  # every window of the first lines closed long ago
    r = c.get("/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({job="openssh"}[1000d]))', "time": str(int(values[-1][0]) + H)})
    assert int(r.json()["data"]["result"][0]["value"][1]) == 1000 + pushed


@pytest.mark.query_workers
def test_a_killed_worker_loses_no_template(make_client, values):
    """The templates live in a worker: one killed between two batches is replaced, the new
    one loads them from the database, and the counts go on as if nothing happened."""
    c = make_client({**CONFIG, "querier": {"worker_processes": 1}})
    half = len(values) // 2
    push_all(c, values[:half])
    mined(c)
    pids = query_worker_pids(parent=os.getpid())
    assert pids, "no worker held the templates"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        # the zygote's child, reaped by the kernel (services/read/worker_zygote.py)
        until(lambda: process_ended(pid), f"worker {pid} gone")
    push_all(c, values[half:])
    mined(c)
    assert query_worker_pids(parent=os.getpid()) not in ([], pids)
    got = totals(patterns(c, values))
    assert sum(got.values()) == len(values)
    for pattern, count in TOP.items():
        assert got.get(pattern) == count, pattern


def test_expired_templates_are_forgotten_without_loading_them_all(make_client, config):
    """Counts older than retain_for go, with the templates left without any: from the store
    and from the miners, which no longer match their lines, and without loading every
    template again (seconds with hundreds of thousands of them; issue 22)."""
    import time

    c = make_client({**config, "pattern_ingester": {"enabled": True, "retain_for": "3h"}})
    service = c.app.state.services.patterns
    service._forgot_at = time.monotonic()  # the test forgets, not the background loop
    t0 = 1_700_000_000 * 10**9
    old = [[str(t0 + i * 10**9), f"disk {i} on node-{i % 3} is full"] for i in range(20)]
    new = [[str(t0 + 4 * H + i * 10**9), f"user u{i} logged in from 10.0.0.{i}"]
           for i in range(20)]
    for values in (old, new):
        body = push_body({"job": "forget"}, values)
        assert c.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    mined(c)
    rng = {"query": '{job="forget"}', "start": str(t0 - H), "end": str(t0 + 5 * H),
           "step": "1h"}
    before = [d["pattern"] for d in c.get(PATTERNS, params=rng).json()["data"]]
    assert len(before) == 2, before             # the state: both templates mined and held
    loads = []
    real_load = service.miners.load

    async def counted_load() -> None:
        loads.append(1)
        await real_load()

    service.miners.load = counted_load
    c.blocking_portal.call(service.forget_old)
    service.miners.load = real_load
    assert loads == []
    after = [d["pattern"] for d in c.get(PATTERNS, params=rng).json()["data"]]
    assert after == [p for p in before if "logged in" in p]
    kept = c.blocking_portal.call(service.db.read, lambda conn: conn.execute(
        "SELECT stream_id, pattern FROM pattern_clusters").fetchall())
    assert [tuple(r)[1] for r in kept] == after
    matched = c.blocking_portal.call(service.miners.match, kept[0][0], [old[0][1], new[0][1]])
    assert matched == [None, after[0]]
