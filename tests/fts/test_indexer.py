"""The indexer service inside the app: it follows pushes, survives restarts from its mark,
and the index it builds answers like a full scan."""

from __future__ import annotations

import sqlite3

from logql.pipeline.line import LineFilter
from storage import fts
from tests.conftest import loghub_lines
from tests.helpers import JSON_HEADERS, PUSH, db_path, now_ns, push_body

OLD = {"limits_config": {"reject_old_samples": False}}


def push_lines(client, labels: dict, lines: list[str], first_ts: int) -> None:
    for start in range(0, len(lines), 500):
        chunk = lines[start:start + 500]
        values = [[str(first_ts + start + i), line] for i, line in enumerate(chunk)]
        r = client.post(PUSH, content=push_body(labels, values), headers=JSON_HEADERS)
        assert r.status_code == 204, r.text


def catch_up(client) -> None:
    """Run the indexer to completion in the app's own event loop (no waiting on time)."""
    indexer = client.app.state.ctx.extras["indexer"]
    client.blocking_portal.call(indexer.catch_up)


def status(client) -> dict:
    return client.blocking_portal.call(client.app.state.ctx.db.read, fts.index_status)


def search(path: str, needle: str, ci: bool = False) -> tuple[list[int], list[int]]:
    """(ids found through the prefilter, ids found by a full scan)."""
    lf = LineFilter("|~", ["(?i)" + needle]) if ci else LineFilter("|=", [needle])
    conn = sqlite3.connect(path)
    try:
        full = [i for i, line in conn.execute("SELECT id, line FROM entries ORDER BY id")
                if lf.match(line)]
        pf = fts.prefilter(conn, lf.required_substrings())
        assert pf is not None
        cond, params = pf.condition()
        got = [i for i, line in conn.execute(
            f"SELECT id, line FROM entries WHERE {cond} ORDER BY id", params) if lf.match(line)]
    finally:
        conn.close()
    return got, full


def test_indexer_follows_pushes(make_client):
    client = make_client(OLD)
    lines = loghub_lines("OpenSSH")
    push_lines(client, {"job": "ssh"}, lines, now_ns() - 10**12)
    catch_up(client)
    st = status(client)
    assert st["pending"] == 0 and st["indexed_through"] == st["max_id"] == len(lines)
    got, full = search(db_path(client), "Failed password for root")
    assert got == full and len(full) > 10
    got, full = search(db_path(client), "FAILED PASSWORD", ci=True)
    assert got == full and len(full) > 10


def test_services_lists_the_indexer(client):
    r = client.get("/services")
    assert "indexer => Running" in r.text.splitlines()


def test_restart_resumes_from_the_mark(make_client, tmp_path):
    data = tmp_path / "data"
    client = make_client(OLD, data_dir=data)
    first = loghub_lines("HDFS")[:1200]
    push_lines(client, {"job": "hdfs"}, first, now_ns() - 10**12)
    catch_up(client)
    assert status(client)["indexed_through"] == 1200
    client.__exit__(None, None, None)

    # rows committed while no indexer ran (as after a crash between commit and indexing)
    conn = sqlite3.connect(data / "logstore.db")
    rows = [(1, 5 * 10**18 + i, i, line + " after-restart-marker")
            for i, line in enumerate(loghub_lines("HDFS")[1200:1500])]
    conn.executemany("INSERT INTO entries (stream_id, ts, hash, line) VALUES (?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()

    client = make_client(OLD, data_dir=data)
    catch_up(client)  # the start-up catch-up may have done it already: the sum is what counts
    indexer = client.app.state.ctx.extras["indexer"]
    assert indexer.rows_indexed == 300  # only the new rows, not the 1200 from before
    assert status(client) == {"indexed_through": 1500, "max_id": 1500, "pending": 0}
    got, full = search(db_path(client), "after-restart-marker")
    assert got == full == list(range(1201, 1501))
    got, full = search(db_path(client), "PacketResponder")
    assert got == full and min(full) <= 1200 < max(full)


def test_partly_indexed_data_answers_like_a_full_scan(make_client):
    client = make_client(OLD)
    lines = loghub_lines("Apache")
    push_lines(client, {"job": "apache"}, lines[:1000], now_ns() - 10**12)
    catch_up(client)
    # stop the indexer so the next rows stay in the unindexed tail
    client.blocking_portal.call(client.app.state.ctx.extras["indexer"].stop)
    push_lines(client, {"job": "apache"}, lines[1000:], now_ns() - 10**12 + 5000)
    st = status(client)
    assert st["indexed_through"] == 1000 and st["pending"] == len(lines) - 1000
    for needle in ("mod_jk child workerEnv in error state", "jk2_init() Found child",
                   "Directory index forbidden"):
        got, full = search(db_path(client), needle)
        assert got == full
        assert any(i <= 1000 for i in full) and any(i > 1000 for i in full)


def test_query_range_over_indexed_and_unindexed_rows_matches_a_full_scan(make_client):
    """What a user sees: query_range with needles answers exactly the lines that contain
    them, whether the rows are in the index, in the unindexed tail, or both."""
    client = make_client(OLD)
    lines = loghub_lines("Linux")
    base = now_ns() - 3600 * 10**9
    push_lines(client, {"job": "linux"}, lines[:1200], base)
    catch_up(client)
    client.blocking_portal.call(client.app.state.ctx.extras["indexer"].stop)
    push_lines(client, {"job": "linux"}, lines[1200:], base + 1200)
    assert status(client)["indexed_through"] == 1200
    cases = [('|= "authentication failure"', lambda l: "authentication failure" in l),
             ('|~ "(?i)CUPSD"', lambda l: "cupsd" in l.lower()),
             ('|= "session opened" |= "root"', lambda l: "session opened" in l and "root" in l),
             ('|= "ab"', lambda l: "ab" in l)]
    for pipeline, keep in cases:
        r = client.get("/logstore/api/v1/query_range", params={
            "query": '{job="linux"} ' + pipeline, "start": str(base - 1),
            "end": str(base + 10**9), "limit": "5000", "direction": "forward"})
        assert r.status_code == 200, r.text
        got = [v[1] for s in r.json()["data"]["result"] for v in s["values"]]
        expected = [l for l in lines if keep(l)]
        assert sorted(got) == sorted(expected) and expected, pipeline
