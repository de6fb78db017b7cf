"""Lines of one stream with the same timestamp come back in the order they were pushed
(forward) or its reverse (backward), in every storage state: SQLite's row id and
ClickHouse's `seq` both keep arrival order, and a limit cuts the same lines."""

from __future__ import annotations

import pytest

from tests.helpers import JSON_HEADERS, PUSH, push_body

T = 1_700_000_000 * 10**9
OLD = {"limits_config": {"reject_old_samples": False}}


@pytest.fixture
def tied(make_client):
    c = make_client(OLD)
    for batch in range(3):  # three pushes, each adding lines at the same two timestamps
        values = [[str(T + k), f"t{k} push{batch} line{i}"] for k in (0, 1) for i in range(2)]
        r = c.post(PUSH, content=push_body({"app": "tie"}, values), headers=JSON_HEADERS)
        assert r.status_code == 204, r.text
    return c


def _lines(c, direction: str, limit: int) -> list[str]:
    r = c.get("/logstore/api/v1/query_range", params={
        "query": '{app="tie"}', "start": str(T), "end": str(T + 10), "limit": str(limit),
        "direction": direction})
    assert r.status_code == 200, r.text
    return [v[1] for s in r.json()["data"]["result"] for v in s["values"]]


ARRIVED = {k: [f"t{k} push{b} line{i}" for b in range(3) for i in range(2)] for k in (0, 1)}


def test_forward_keeps_arrival_order(tied):
    assert _lines(tied, "forward", 100) == ARRIVED[0] + ARRIVED[1]
    assert _lines(tied, "forward", 4) == ARRIVED[0][:4]


def test_backward_reverses_it(tied):
    assert _lines(tied, "backward", 100) == list(reversed(ARRIVED[1])) + \
        list(reversed(ARRIVED[0]))
    assert _lines(tied, "backward", 4) == list(reversed(ARRIVED[1]))[:4]
