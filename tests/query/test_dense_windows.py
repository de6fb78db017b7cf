"""Dense data is read a bounded number of rows at a time: a query's first window (a minute)
over tens of thousands of lines per second is cut to the rows that fit, in the head and in
sealed blocks, and the answer is still every line, in order, exactly once. That includes
thousands of lines sharing one nanosecond, which no window can split."""

from __future__ import annotations

import json

import pytest

from tests.helpers import JSON_HEADERS, PUSH

QUERY_RANGE = "/logstore/api/v1/query_range"
BASE = 1_700_000_000 * 10**9
SPREAD = 60_000          # lines over 60 ms, round robin over three streams
BURST = 20_000           # lines of one stream at one nanosecond, in the middle
BURST_TS = BASE + 30_000_000
# the sealer moves rows only when the test says so (/flush), so each case is what it says
CONFIG = {"limits_config": {"reject_old_samples": False, "max_entries_limit_per_query": 100_000,
                            "ingestion_rate_mb": 100, "ingestion_burst_size_mb": 200},
          "storage": {"sealing_enabled": False}}


def pushed() -> dict[str, list[tuple[int, str]]]:
    streams: dict[str, list[tuple[int, str]]] = {"a": [], "b": [], "c": [], "d": []}
    for i in range(SPREAD):
        name = "abc"[i % 3]
        streams[name].append((BASE + i * 1000 + 1, f"{name} line {i}"))
    streams["d"] = [(BURST_TS, f"d burst {i}") for i in range(BURST)]
    return streams


@pytest.fixture(scope="module", params=["head", "sealed", "mixed"])
def dense(request, tmp_path_factory):
    """All in the head; all sealed; or the spread sealed and the burst in the head (a window
    whose head rows all share the burst's nanosecond still reads the sealed rows before
    it)."""
    from litestar.testing import TestClient

    from app import create_app
    from tests.conftest import make_config

    cfg = make_config(tmp_path_factory.mktemp("dense") / "data", CONFIG)
    with TestClient(create_app(cfg)) as client:
        for name, values in pushed().items():
            if name == "d" and request.param == "mixed":
                assert client.post("/flush").status_code == 204
            for k in range(0, len(values), 10_000):
                body = {"streams": [{"stream": {"job": "dense", "s": name},
                                     "values": [[str(t), v] for t, v in values[k:k + 10_000]]}]}
                r = client.post(PUSH, content=json.dumps(body), headers=JSON_HEADERS)
                assert r.status_code == 204, r.text
        if request.param == "sealed":
            assert client.post("/flush").status_code == 204
        yield client


def query(client, direction: str, query: str = '{job="dense"}', start: int = BASE,
          end: int = BASE + 10**9) -> dict[str, list[tuple[int, str]]]:
    r = client.get(QUERY_RANGE, params={"query": query, "start": str(start), "end": str(end),
                                        "limit": "100000", "direction": direction})
    assert r.status_code == 200, r.text
    return {s["stream"]["s"]: [(int(t), line) for t, line in s["values"]]
            for s in r.json()["data"]["result"]}


@pytest.mark.parametrize("direction", ["backward", "forward"])
def test_every_line_once_in_order(dense, direction):
    got = query(dense, direction)
    want = pushed()
    assert set(got) == set(want)
    for name, values in got.items():
        ts = [t for t, _ in values]
        assert ts == sorted(ts, reverse=direction == "backward"), name
        assert sorted(values) == sorted(want[name]), name


def test_a_filtered_scan_and_a_limit_stay_exact(dense):
    got = query(dense, "backward", '{job="dense"} |~ "(a|d) .*"')
    assert sorted(got) == ["a", "d"]
    assert len(got["d"]) == BURST and len(got["a"]) == SPREAD // 3
    r = dense.get(QUERY_RANGE, params={"query": '{job="dense", s=~"a|b"}', "limit": "1000",
                                       "start": str(BASE), "end": str(BASE + 10**9)})
    values = sorted((int(t), line) for s in r.json()["data"]["result"] for t, line in s["values"])
    newest = sorted((t, v) for n in "ab" for t, v in pushed()[n])[-1000:]
    assert values == newest


def test_a_limit_inside_one_nanosecond(dense):
    got = query(dense, "forward", '{job="dense", s="d"}', BURST_TS, BURST_TS + 1)
    assert len(got["d"]) == BURST and len(set(got["d"])) == BURST
