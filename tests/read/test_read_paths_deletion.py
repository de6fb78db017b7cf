"""Every read path honours deletion and retention, in every storage state.

Two streams: `kept` (an hour old) and `victim` (three days old, with a label name, a field,
a field value and a pattern word of its own). Each read path is asked once before the
victim goes (its answer must show the victim: the probe reaches it; for retention, with the
retention clock set two days back) and once after the victim went, in one of four ways:

    pending    a delete request for it exists, not yet processed (reads must filter)
    processed  the compactor processed that request (the lines are gone from disk)
    expired    a retention rule of 2 days expired it (reads must filter at once)
    swept      and the compactor swept it from disk
 After, no answer may show anything of the victim, and the
answers that list lines or streams must still show the kept ones.

The matrix is read path x storage state (tests/conftest.py MATRIX) x the four ways.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import JSON_HEADERS, PUSH, push_body

NS = 10**9
H = 3600 * NS
NOW = time.time_ns()
VICTIM, KEPT = "victim", "kept"   # every answer about the victim names it, none else does
KEPT_LINES = [[str(NOW - H + i * NS), f"kept line {i} keptfield=k{i % 3} level=info"]
              for i in range(30)]
VICTIM_LINES = [[str(NOW - 72 * H + i * NS),
                 f"victimword gone again victimfield=victimvalue level=error n={i}"]
                for i in range(30)]
RANGE = {"start": str(NOW - 96 * H), "end": str(NOW + NS)}
APP = '{app="rp"}'
BY_WHO = '{who=~".+"}'

# (name, path, params, whether the kept stream must still show)
READS = [
    ("query log", "/logstore/api/v1/query_range", {"query": APP, "limit": "1000", **RANGE}, 1),
    ("query metric", "/logstore/api/v1/query",
     {"query": f"sum by (who) (count_over_time({APP}[4d]))", "time": str(NOW + NS)}, 1),
    ("labels", "/logstore/api/v1/labels", RANGE, 1),
    ("label values", "/logstore/api/v1/label/who/values", RANGE, 1),
    ("series", "/logstore/api/v1/series", {"match[]": APP, **RANGE}, 1),
    ("stats", "/logstore/api/v1/index/stats", {"query": APP, **RANGE}, 1),
    ("volume", "/logstore/api/v1/index/volume", {"query": BY_WHO, **RANGE}, 1),
    ("volume_range", "/logstore/api/v1/index/volume_range",
     {"query": BY_WHO, "step": "3600", **RANGE}, 1),
    ("patterns", "/logstore/api/v1/patterns", {"query": APP, "step": "3600", **RANGE}, 1),
    ("detected_labels", "/logstore/api/v1/detected_labels", {"query": APP, **RANGE}, 1),
    ("detected_fields", "/logstore/api/v1/detected_fields", {"query": APP, **RANGE}, 1),
    ("detected_field values", "/logstore/api/v1/detected_field/victimfield/values",
     {"query": APP, **RANGE}, 0),
    ("compat query", "/api/compat/query", {"query": APP, "limit": "1000", **RANGE}, 1),
    ("compat labels", "/api/compat/label", RANGE, 1),
    ("compat label values", "/api/compat/label/who/values", RANGE, 1),
    ("compat series", "/api/compat/series", {"match[]": APP, **RANGE}, 1),
    ("tail history", "/logstore/api/v1/tail", {"query": APP, "limit": "1000",
                                               "start": RANGE["start"]}, 1),
]


def read(client, path: str, params: dict) -> str:
    """The answer's text; for the tail, the history frames sent before any live line."""
    if path.endswith("/tail"):
        query = "&".join(f"{k}={v}" for k, v in params.items())
        with client.websocket_connect(f"{path}?{query}") as ws:
            frame = ws.receive_text()
        return frame
    r = client.get(path, params=params)
    assert r.status_code == 200, (path, r.text)
    return r.text


def stats_entries(text: str) -> int:
    return json.loads(text)["entries"]


@pytest.fixture(scope="module", params=["pending", "processed", "expired", "swept"])
def answers(request, tmp_path_factory, storage_state):
    """(before, after) answers of every read path, and the client."""
    from tests.conftest import matrix_client

    case = request.param
    limits = {"reject_old_samples": False, "retention_period": "30d"}
    if case in ("expired", "swept"):
        limits["retention_stream"] = [
            {"selector": f'{{who="{VICTIM}"}}', "priority": 1, "period": "2d"}]
    # the miner keeps 3 days of samples by default: the victim is that old
    extra = {"limits_config": limits, "pattern_ingester": {"enabled": True, "retain_for": "7d"},
             # a pending request stays pending: the cancel period is not over
             "compactor": {"retention_enabled": True, "delete_request_cancel_period":
                           "24h" if case == "pending" else "0s",
                           "retention_delete_delay": "0s"}}
    with matrix_client(tmp_path_factory.mktemp(f"rp-{case}") / "data", extra,
                       storage_state) as client:
        ctx = client.app.state.services
        # the sweeps are the test's: one at start-up that ran after the pushes would remove
        # the victim before it was read (on ClickHouse it first sets the tables' TTL)
        client.blocking_portal.call(ctx.compactor.stop)
        for labels, lines in (({"app": "rp", "who": KEPT, "keptlabel": "1"}, KEPT_LINES),
                              ({"app": "rp", "who": VICTIM, "victimlabel": "1"}, VICTIM_LINES)):
            r = client.post(PUSH, content=push_body(labels, lines), headers=JSON_HEADERS)
            assert r.status_code == 204, r.text
        retention = ctx.retention
        real_clock = retention.clock
        if case in ("expired", "swept"):
            retention.clock = lambda: NOW - 48 * H  # two days ago the victim was a day old
        # mined before anything goes: the patterns must forget the victim's lines
        client.blocking_portal.call(ctx.patterns.catch_up)
        before = {name: read(client, path, params) for name, path, params, _ in READS}
        if case in ("pending", "processed"):
            r = client.post("/logstore/api/v1/delete", params={
                "query": f'{{who="{VICTIM}"}}', "start": str(NOW // NS - 96 * 3600),
                "end": str(NOW // NS)})
            assert r.status_code == 204, r.text
        retention.clock = real_clock  # now it is three days old: expired
        if case in ("processed", "swept"):
            client.blocking_portal.call(ctx.compactor.run_once)
        if case in ("pending", "processed"):
            assert [q["status"] for q in client.get("/logstore/api/v1/delete").json()] == [
                "received" if case == "pending" else "processed"]
        after = {name: read(client, path, params) for name, path, params, _ in READS}
        yield before, after


@pytest.mark.parametrize("name, kept", [(r[0], r[3]) for r in READS])
def test_a_read_path_shows_nothing_deleted_or_expired(answers, name, kept):
    before, after = answers
    if name == "stats":
        assert stats_entries(before[name]) == len(KEPT_LINES) + len(VICTIM_LINES)
        assert stats_entries(after[name]) == len(KEPT_LINES)
        return
    assert VICTIM in before[name], f"{name} never showed the victim: the probe proves nothing"
    assert VICTIM not in after[name], after[name]
    if kept:
        assert KEPT in after[name], after[name]
