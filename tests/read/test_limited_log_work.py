"""A limited log query over thousands of streams costs about the rows it returns, not a
unit of work per matched stream (issue 22): the work is counted, not timed.

Each query runs with every line in the head and again with every line sealed into blocks
(one block per stream, as quiet streams end up)."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from tests.helpers import JSON_HEADERS, PUSH

TENANT = "limited"
HEADERS = {"X-Scope-OrgID": TENANT}
STREAMS = 300
NS = 10**9
# the work is counted in this process: the queries run on its reader threads
CONFIG = {"auth_enabled": True, "storage": {"sealing_enabled": False},
          "querier": {"worker_processes": 0}}


def _push(client, now: int) -> None:
    streams = []
    for i in range(STREAMS):
        # every stream's lines 10 minutes apart, the newest ones a nanosecond apart: each
        # block spans the whole range, as a quiet pod's does
        values = [[str(now - (30 - 10 * k) * 60 * NS + i), f"level=info pod={i} k={k}"]
                  for k in range(3)]
        streams.append({"stream": {"env": "prod", "pod": f"pod-{i}"}, "values": values})
    r = client.post(PUSH, content=json.dumps({"streams": streams}),
                    headers={**JSON_HEADERS, **HEADERS})
    assert r.status_code == 204, r.text


@pytest.fixture(params=["head", "sealed"])
def store(request, make_client, tmp_path):
    data = tmp_path / "data"
    client = make_client(CONFIG, data_dir=data)
    now = time.time_ns()
    _push(client, now)
    if request.param == "sealed":
        assert client.post("/flush").status_code == 204
    db = sqlite3.connect(data / "logstore.db")
    head, blocks = db.execute("SELECT (SELECT count(*) FROM entries), "
                              "(SELECT count(*) FROM blocks)").fetchone()
    db.close()
    assert (head, blocks) == ((0, STREAMS) if request.param == "sealed" else (3 * STREAMS, 0))
    return client, now, request.param


def _query(client, now: int, query: str, limit: int) -> list[dict]:
    r = client.get("/logstore/api/v1/query_range", headers=HEADERS,
                   params={"query": query, "limit": str(limit),
                           "start": str(now - 3600 * NS), "end": str(now + NS)})
    assert r.status_code == 200, r.text
    return r.json()["data"]["result"]


@pytest.fixture
def parsed(monkeypatch):
    """How many stream label sets the reads parse from their stored text."""
    from storage import streams
    real = streams.parse_canonical
    count = [0]

    def counting(text: str) -> dict[str, str]:
        count[0] += 1
        return real(text)
    monkeypatch.setattr(streams, "parse_canonical", counting)
    return count


def test_only_the_streams_that_answer_have_their_labels_read(store, parsed):
    client, now, _ = store
    parsed[0] = 0
    found = _query(client, now, '{env="prod"} |= "pod=7 "', 100)
    assert [s["stream"] for s in found] == [{"detected_level": "info", "env": "prod",
                                             "pod": "pod-7",
                                             "service_name": "unknown_service"}]
    assert len(found[0]["values"]) == 3
    assert parsed[0] == 1
    parsed[0] = 0
    found = _query(client, now, '{env="prod"}', 5)
    # the newest line of each of the last five pods
    assert sorted(s["stream"]["pod"] for s in found) == [f"pod-{i}" for i in range(295, 300)]
    assert parsed[0] == 5


def test_a_limited_read_decodes_few_more_rows_than_it_returns(store, monkeypatch):
    """The newest line of every pod falls within a microsecond: a limited query's first
    window is cut to the newest LIMITED_FIRST_ROWS sealed rows, so only their blocks' lines
    are decompressed, not every pod's."""
    from storage import reader
    from storage.blocks.sealed import SealedBlocks

    client, now, state = store
    monkeypatch.setattr(reader, "LIMITED_FIRST_ROWS", 20)
    completed: list[int] = []
    real = SealedBlocks._complete

    def counting(self, decoded):
        completed.append(sum(not d.complete for d in decoded))
        return real(self, decoded)
    monkeypatch.setattr(SealedBlocks, "_complete", counting)
    found = _query(client, now, '{env="prod"}', 5)
    assert sorted(s["stream"]["pod"] for s in found) == [f"pod-{i}" for i in range(295, 300)]
    # the head holds no blocks; the sealed store decodes the 20 newest rows' blocks
    assert sum(completed) == (20 if state == "sealed" else 0)
