"""A real server killed with SIGKILL mid-indexing: after the restart every pushed line is
found, and the indexer finishes from its mark with an index that passes FTS5's own check."""

from __future__ import annotations

import sqlite3
import time

import httpx

from storage import fts
from tests.conftest import loghub_lines
from tests.helpers import now_ns

OLD = {"limits_config": {"reject_old_samples": False}}


def index_status(data_dir) -> dict:
    conn = sqlite3.connect(f"file:{data_dir / 'logstore.db'}?mode=ro", uri=True)
    try:
        return fts.index_status(conn)
    finally:
        conn.close()


def test_sigkill_then_restart_finishes_the_index(make_server, tmp_path):
    data = tmp_path / "data"
    server = make_server(OLD, data_dir=data)
    lines = loghub_lines("Thunderbird")
    base = now_ns() - 3600 * 10**9
    batches = list(range(0, len(lines), 250))
    with httpx.Client(base_url=server.url) as http:
        for start in batches[:-1]:
            values = [[str(base + start + i), line]
                      for i, line in enumerate(lines[start:start + 250])]
            r = http.post("/logstore/api/v1/push",
                          json={"streams": [{"stream": {"job": "tb"}, "values": values}]})
            assert r.status_code == 204
        # the last batch, then SIGKILL at once: the indexer pauses while pushes arrive, so
        # rows are still waiting for the index when the process dies (asserted below)
        start = batches[-1]
        values = [[str(base + start + i), line]
                  for i, line in enumerate(lines[start:start + 250])]
        r = http.post("/logstore/api/v1/push",
                      json={"streams": [{"stream": {"job": "tb"}, "values": values}]})
        assert r.status_code == 204
        server.kill()
    before = index_status(data)
    assert before["max_id"] == len(lines)
    assert before["pending"] > 0, "the kill came after indexing had finished"

    server = make_server(OLD, data_dir=data)
    with httpx.Client(base_url=server.url) as http:
        r = http.get("/logstore/api/v1/query_range", params={
            "query": '{job="tb"} |= "session closed for user root"', "start": str(base - 1),
            "end": str(base + 10**9), "limit": "5000"})
        assert r.status_code == 200
        got = sorted(v[1] for s in r.json()["data"]["result"] for v in s["values"])
        assert got == sorted(l for l in lines if "session closed for user root" in l) and got
    deadline = time.monotonic() + 30
    while index_status(data)["pending"]:  # the indexer works in the background
        assert time.monotonic() < deadline, index_status(data)
        time.sleep(0.05)
    after = index_status(data)
    assert after == {"indexed_through": len(lines), "max_id": len(lines), "pending": 0}
    assert after["indexed_through"] >= before["indexed_through"]
    server.stop()
    conn = sqlite3.connect(data / "logstore.db")
    conn.execute("INSERT INTO entries_fts (entries_fts) VALUES ('integrity-check')")
    conn.close()
