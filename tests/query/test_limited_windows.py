"""A limited read returns exactly the first lines of the whole answer, in either direction,
however the reader cuts the range into parts (the ClickHouse reader sizes its parts from
a count per hour; SQLite scans in windows): lines on exact hour boundaries, limits on both
sides of a part's size."""

from __future__ import annotations

import pytest

from tests.helpers import JSON_HEADERS, PUSH, push_body

H = 3600 * 10**9
T0 = 1_700_000_000 * 10**9 // H * H       # an hour boundary
HOURS = 30
OLD = {"limits_config": {"reject_old_samples": False, "max_entries_limit_per_query": 10000}}


@pytest.fixture(scope="module")
def stored(tmp_path_factory, storage_state):
    from tests.conftest import matrix_client

    with matrix_client(tmp_path_factory.mktemp("windows") / "data", OLD, storage_state) as c:
        for s in range(3):
            ts = sorted({T0 + k * 120 * 10**9 + s for k in range(HOURS * 30)}
                        | {T0 + h * H for h in range(HOURS)})  # every hour's first ns
            values = [[str(t), f"s{s} at {t}"] for t in ts]
            for i in range(0, len(values), 500):
                r = c.post(PUSH, content=push_body({"app": "w", "s": str(s)}, values[i:i + 500]),
                           headers=JSON_HEADERS)
                assert r.status_code == 204, r.text
        yield c


def _lines(c, direction: str, limit: int) -> list[str]:
    r = c.get("/logstore/api/v1/query_range", params={
        "query": '{app="w"}', "start": str(T0), "end": str(T0 + HOURS * H),
        "limit": str(limit), "direction": direction})
    assert r.status_code == 200, r.text
    rows = [(int(ts), line) for s in r.json()["data"]["result"] for ts, line in s["values"]]
    rows.sort(reverse=direction == "backward")
    return [line for _, line in rows]


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_a_limit_cuts_the_whole_answer(stored, direction):
    everything = _lines(stored, direction, 10000)
    # 900 lines a stream, and 30 on the hours: stream s0's lines every 2 minutes fall on
    # them already
    assert len(everything) == 900 + 930 + 930
    for limit in (1, 999, 1000, 1001, 2500):
        assert _lines(stored, direction, limit) == everything[:limit], limit
