"""A node that does not mine the patterns (a cluster's follower, docs/scale-out.md) learns the
templates the miner wrote or dropped since its last look, not every template again (issue 22:
a full read took 13 s with 100,000 streams of 5 templates, once a minute), and matches the
lines a delete request hides as the miner does: /patterns answers the same on both.

Run in the head state (the store is the SQLite file) and the clickhouse state (the shared
PostgreSQL of a cluster), with the follower's templates on a reader thread and in a worker's
job, as the two ways a node holds them (services/patterns/mining.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from services.patterns import patterns as patterns_module
from services.patterns.mining import LocalMiners, MinerState, WorkerMiners, run_job
from services.patterns.patterns import LEASE, Patterns
from storage import patterns as store
from storage.shared.leases import SharedLeases

from tests.helpers import JSON_HEADERS, PUSH, push_body

H = 3600 * 10**9
T0 = 1_700_000_000 * 10**9
CONFIG = {"limits_config": {"reject_old_samples": False},
          "pattern_ingester": {"enabled": True, "retain_for": "3h"}}
PODS = 30
LOGIN = "user {} logged in from the office network without trouble"
LEGACY = "legacy job {} finished writing the nightly export to the archive"


class AnotherNodeMines:
    """The leases of a node of one data directory that does not mine: only a cluster has
    such nodes, and on SQLite another node's lease is stood in for."""
    node = "follower"

    async def holds(self, name: str) -> bool:
        return False


class _Rows:
    def __init__(self, rows: list) -> None:
        self.rows = rows

    def fetchall(self) -> list:
        return self.rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def __iter__(self):
        return iter(self.rows)


class _Counted:
    """A connection whose statements over the templates count the rows they give."""

    def __init__(self, conn: Any, counter: "TemplateRowsRead") -> None:
        self.conn = conn
        self.counter = counter

    def execute(self, sql: str, args: Any = ()) -> _Rows:
        rows = self.conn.execute(sql, args).fetchall()
        if "FROM pattern_clusters" in sql:
            self.counter.rows += len(rows)
        return _Rows(rows)


class TemplateRowsRead:
    """The shared store as a follower reads it, counting the template rows read."""

    def __init__(self, shared: Any) -> None:
        self.shared = shared
        self.rows = 0

    async def read(self, fn, *args):
        return await self.shared.read(lambda conn, *a: fn(_Counted(conn, self), *a), *args)


def push(c, pod: str, values: list) -> None:
    body = push_body({"job": "follow", "pod": pod}, values)
    assert c.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204


def stored_templates(shared) -> int:
    return shared.read_sync(lambda conn: conn.execute(
        "SELECT count(*) FROM pattern_clusters").fetchone()[0])


def held(state: MinerState) -> dict:
    """Each stream's templates as a miner holds them, in the order it tries them."""
    return {sid: [(c.id, c.template, c.line, c.spans, sorted(c.gaps), c.level, c.pattern())
                  for c in miner.clusters]
            for sid, miner in sorted(state.miners.items()) if miner.clusters}


@pytest.fixture(params=["reader-thread", "worker-job"])
def follower_kind(request):
    return request.param


def test_a_follower_learns_only_what_the_miner_changed(make_client, follower_kind,
                                                       monkeypatch):
    c = make_client(CONFIG)
    miner = c.app.state.services.patterns
    miner._forgot_at = time.monotonic()  # the test drops old counts, not the background loop
    shared = miner.db
    portal = c.blocking_portal
    # the mined state: every pod's login template, the first 5 pods' also from 4 hours back
    for i in range(PODS):
        legacy = [[str(T0 - 4 * H + i), LEGACY.format(i)]] if i < 5 else []
        push(c, f"pod-{i}", legacy + [[str(T0 + i * 10**9), LOGIN.format("alice")],
                                      [str(T0 + i * 10**9 + 1), f"disk {i} on node is full"]])
    portal.call(miner.catch_up)
    assert stored_templates(shared) == 2 * PODS + 5

    # a follower: another node holds the miner's lease; it loads every template at start
    counted = TemplateRowsRead(shared)
    state = MinerState()
    if follower_kind == "reader-thread":
        miners = LocalMiners(counted)
        state = miners.state
    else:
        miners = WorkerMiners(lambda job: counted.read(lambda conn: run_job(state, conn, job)))
    leases = (SharedLeases(shared, node="follower") if isinstance(miner.leases, SharedLeases)
              else AnotherNodeMines())
    follower = Patterns(counted, True, 3 * H, miners, leases=leases)
    portal.call(follower.start)
    portal.call(follower.stop)  # the test's looks, not its background loop's
    assert not portal.call(leases.holds, LEASE)
    assert counted.rows == 2 * PODS + 5 and miners.templates == 2 * PODS + 5
    legacy_sids = portal.call(shared.read, lambda conn: [r[0] for r in conn.execute(
        "SELECT stream_id FROM pattern_clusters WHERE pattern LIKE 'legacy%'")])
    assert len(legacy_sids) == 5
    for sid in legacy_sids:
        assert portal.call(miners.match, sid, [LEGACY.format(9)]) != [None]

    # a minute of mining: 3 pods' login template widened, one pod's new template, a new pod;
    # then the 5 legacy templates expire
    for i in range(3):
        push(c, f"pod-{i}", [[str(T0 + 60 * 10**9 + i), LOGIN.format("bob")]])
    push(c, "pod-3", [[str(T0 + 61 * 10**9), "connection reset by peer while reading the body"]])
    push(c, "pod-new", [[str(T0 + 62 * 10**9), LOGIN.format("carol")]])
    portal.call(miner.catch_up)
    portal.call(miner.forget_old)
    assert stored_templates(shared) == 2 * PODS + 2

    monkeypatch.setattr(patterns_module, "TEMPLATES_REFRESH_SECONDS", 0.0)
    counted.rows = 0
    assert portal.call(follower.mine_now) == 0
    # the templates written since its last look (3 widened, 2 new), not the 62 stored
    assert counted.rows == 5, counted.rows
    assert miners.templates == 2 * PODS + 2
    fresh = MinerState()
    shared.read_sync(fresh.load)
    assert held(state) == held(fresh)
    for sid in legacy_sids:
        assert portal.call(miners.match, sid, [LEGACY.format(9)]) == [None]

    # /patterns on the follower: the hidden lines are taken from the same templates
    sids = portal.call(shared.read, lambda conn: [r[0] for r in conn.execute(
        "SELECT DISTINCT stream_id FROM pattern_clusters ORDER BY 1")])
    hidden = [(sid, T0 + 62 * 10**9, LOGIN.format("carol")) for sid in sids]
    hidden += [(sids[0], T0 + 2 * 10**9, "disk 7 on node is full")]
    window = (sids, T0 - 5 * H, T0 + H, H)
    shown = portal.call(follower.query, *window)
    answer = portal.call(follower.query, *window, hidden)
    assert answer != shown                                # the hidden lines came off
    assert answer == portal.call(miner.query, *window, hidden)

    counted.rows = 0
    assert portal.call(follower.mine_now) == 0
    assert counted.rows == 0                              # nothing new: nothing read


@pytest.fixture
def shared(state_store):
    """Where the templates live (tests/conftest.py state_store)."""
    return state_store


def _templates(sid: int, cids: range) -> list:
    return [(sid, cid, ["job", f"t{cid}", "ok"], f"job t{cid} ok", [[0, 3], [4, 6], [7, 9]],
             [], "info", f"job t{cid} ok") for cid in cids]


def _plans_of_a_look(conn, state: MinerState) -> list[str]:
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        state.refresh(conn)
    finally:
        conn.set_trace_callback(None)
    return [plan[-1] for sql in statements
            for plan in conn.execute("EXPLAIN QUERY PLAN " + sql)]


def test_a_follower_that_missed_the_listed_drops_reads_every_template(shared):
    """Dropped templates are listed for two rounds of the expiry: a follower that looked
    before the rounds still listed reads every template again, and holds what is stored."""
    samples = {(sid, cid, 0): 1 for sid in (1, 2) for cid in range(1, 4)}
    shared.write_sync(lambda conn: store.save(
        conn, _templates(1, range(1, 4)) + _templates(2, range(1, 4)), samples, 1))
    behind, current = MinerState(), MinerState()
    shared.read_sync(behind.load)
    shared.read_sync(current.load)
    for n, bucket in enumerate((100_000, 200_000, 300_000)):
        # each round: stream 2 gains a template, stream 1's template n + 1 expires
        counts = {(1, cid, bucket): 1 for cid in range(n + 2, 4)}
        counts.update({(2, cid, bucket): 1 for cid in range(1, 5 + n)})
        shared.write_sync(lambda conn: store.save(conn, _templates(2, range(4 + n, 5 + n)),
                                                  counts, 2))
        assert shared.write_sync(lambda conn: store.forget_older(conn, 50_000)) == [(1, n + 1)]
        if n < 2:
            assert shared.read_sync(current.refresh) == 6
    # `current` looked after each round but the last: it learns the last one's change and drop
    _, dropped, changed = shared.read_sync(store.templates, current.version)
    assert dropped == [(1, 3)] and [r[:2] for r in changed] == [(2, 6)]
    if hasattr(shared, "path"):  # SQLite: the look finds them by their counter, no scan
        plans = shared.read_sync(_plans_of_a_look, current)
        assert plans and not [p for p in plans if p.startswith("SCAN")], plans
    # `behind` looked before the first round, whose drop is no longer listed
    assert shared.read_sync(store.templates, behind.version)[1] is None
    fresh = MinerState()
    shared.read_sync(fresh.load)
    assert [c.id for c in fresh.miners[2].clusters] == [1, 2, 3, 4, 5, 6] and 1 not in fresh.miners
    for state in (behind, current):
        assert shared.read_sync(state.refresh) == 6
        assert held(state) == held(fresh)
