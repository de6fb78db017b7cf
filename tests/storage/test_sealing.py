"""The sealer against a real server: sealed lines answer exactly as head lines did, repeats
and late lines stay exact after sealing, /flush seals the head, and a SIGKILL in the middle
of sealing loses no acknowledged line and shows none twice."""

from __future__ import annotations

import re
import sqlite3
import time
from collections import Counter

import httpx
import pytest

from tests.conftest import loghub_lines
from tests.helpers import JSON_HEADERS, PUSH, head_rows, sealed_blocks, sealed_rows, stored

T = 1_700_000_000 * 10**9
DAY = 86400 * 10**9
OLD = {"limits_config": {"reject_old_samples": False}}
EAGER = {**OLD, "storage": {"block_window": "1m", "seal_grace_period": "0s",
                            "block_max_rows": 40}}
QUERY_RANGE = "/logstore/api/v1/query_range"


def push(url: str, streams: list[tuple[dict, list]]) -> None:
    body = {"streams": [{"stream": labels, "values": values} for labels, values in streams]}
    r = httpx.post(url + PUSH, json=body, headers=JSON_HEADERS, timeout=60)
    assert r.status_code == 204, r.text


def metric(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics").text
    m = re.search(rf"^{name}(?:_total)? (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def wait_until(cond, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling the server's state, not synchronising on elapsed time


def corpus() -> list[tuple[dict, list]]:
    streams = []
    for s in range(3):
        values = []
        for i in range(400):
            line = f"s{s} line {i} level={'error' if i % 7 == 0 else 'info'} took={i % 13}ms"
            if i % 5 == 0:
                values.append([str(T + i * 10**9 + s), line, {"trace_id": f"t{i}"}])
            else:
                values.append([str(T + i * 10**9 + s), line])
        streams.append(({"app": "seal", "n": str(s)}, values))
    return streams


QUERIES = [
    ('{app="seal"}', {"limit": "5000"}),
    ('{app="seal"}', {"limit": "37", "direction": "forward"}),
    ('{app="seal"} |= "level=error"', {"limit": "5000"}),
    ('{app="seal"} | logfmt | took > 10', {"limit": "100"}),
    ('{app="seal"} | trace_id="t15"', {"limit": "100"}),
    ('sum by (n) (count_over_time({app="seal"}[1m]))', {"step": "60"}),
    ('sum(bytes_over_time({app="seal"}[90s]))', {"step": "45"}),
    ('sum by (trace_id) (count_over_time({app="seal"} |= "error" [5m]))', {"step": "300"}),
]


def answers(url: str) -> list:
    out = []
    for q, extra in QUERIES:
        params = {"query": q, "start": str(T), "end": str(T + 500 * 10**9), **extra}
        r = httpx.get(url + QUERY_RANGE, params=params, timeout=60)
        assert r.status_code == 200, r.text
        out.append(r.json()["data"]["result"])
    return out


def test_sealed_lines_answer_like_head_lines(make_server, tmp_path):
    data = tmp_path / "data"
    server = make_server({**OLD, "storage": {"sealing_enabled": False}}, data_dir=data)
    push(server.url, corpus())
    in_head = answers(server.url)
    server.stop()
    server = make_server(EAGER, data_dir=data)
    wait_until(lambda: metric(server.url, "logstore_sealer_rows_sealed") == 1200,
               "every line sealed")
    assert answers(server.url) == in_head
    conn = sqlite3.connect(data / "logstore.db")
    assert head_rows(conn) == 0
    assert sealed_blocks(conn) >= 3 * 7
    conn.close()


def test_flush_seals_the_head_and_repeats_stay_single(make_server):
    server = make_server(OLD)  # default windows: nothing of the last hour is due
    now = time.time_ns()
    values = [[str(now - i * 10**9), f"recent {i}"] for i in range(50)]
    push(server.url, [({"app": "f"}, values)])
    assert httpx.post(server.url + "/flush").status_code == 204
    db = server.data_dir / "logstore.db"
    assert len(sealed_rows(sqlite3.connect(db))) == 50
    # the same lines again, and a line that is new but older than what is sealed
    push(server.url, [({"app": "f"}, values + [[str(now - 100 * 10**9), "late"]])])
    rows = stored(str(db))
    assert Counter(r[3] for r in rows) == Counter([f"recent {i}" for i in range(50)] + ["late"])
    params = {"query": 'sum(count_over_time({app="f"}[10m]))', "time": str(now)}
    r = httpx.get(server.url + "/logstore/api/v1/query", params=params).json()
    assert r["data"]["result"][0]["value"][1] == "51"
    lines = httpx.get(server.url + QUERY_RANGE, params={
        "query": '{app="f"}', "start": str(now - 200 * 10**9), "end": str(now + 1),
        "limit": "3", "direction": "forward"}).json()["data"]["result"]
    assert [v[1] for s in lines for v in s["values"]] == ["late", "recent 49", "recent 48"]


def test_ids_stay_unique_after_the_newest_rows_are_sealed(make_server):
    server = make_server(OLD)
    push(server.url, [({"app": "a"}, [[str(T), "first"]])])
    assert httpx.post(server.url + "/flush").status_code == 204
    push(server.url, [({"app": "b"}, [[str(T), "second"]])])  # same timestamp, later
    conn = sqlite3.connect(server.data_dir / "logstore.db", isolation_level=None)
    conn.execute("BEGIN")  # one snapshot: the sealer may be moving the second line now
    ids = [r[0] for r in sealed_rows(conn)] + [r[0] for r in conn.execute(
        "SELECT id FROM entries")]
    conn.execute("COMMIT")
    assert len(ids) == len(set(ids)) == 2
    got = httpx.get(server.url + QUERY_RANGE, params={
        "query": '{app=~"a|b"}', "start": str(T), "end": str(T + 1),
        "direction": "forward"}).json()["data"]["result"]
    assert [s["values"][0][1] for s in got] == ["first", "second"]


def test_sigkill_while_sealing_loses_nothing_and_shows_nothing_twice(make_server, tmp_path):
    from tests.helpers import synthetic_lines

    lines = synthetic_lines(2000)  # volume only: no dependence on the corpus
    values = [[str(T + i * 10**9), line] for i, line in enumerate(lines)]
    data = tmp_path / "data"
    server = make_server({**EAGER, "storage": {**EAGER["storage"], "block_max_rows": 5}},
                         data_dir=data)
    for i in range(0, len(values), 500):
        push(server.url, [({"app": "k", "part": str(i % 3)}, values[i:i + 500])])
    wait_until(lambda: metric(server.url, "logstore_sealer_blocks_written") >= 3,
               "sealing under way")
    server.kill()
    conn = sqlite3.connect(data / "logstore.db")
    head = head_rows(conn)
    conn.close()
    assert head > 0, "the kill came after sealing had finished: the test proved nothing"
    server.start()
    got = Counter((r[2], r[3]) for r in stored(str(data / "logstore.db")))
    assert got == Counter((int(ts), line) for ts, line in values)
    assert httpx.post(server.url + "/flush").status_code == 204
    got = Counter((r[2], r[3]) for r in stored(str(data / "logstore.db")))
    assert got == Counter((int(ts), line) for ts, line in values)
    r = httpx.get(server.url + "/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({app="k"}[2d]))', "time": str(T + DAY)}).json()
    assert r["data"]["result"][0]["value"][1] == str(len(values))


def test_a_quiet_stream_keeps_one_block_across_windows(make_server, tmp_path):
    """A pod that logs a few lines per window: each window's lines are sealed on their own,
    yet they end in one block (a read pays per block), and read back the same after a
    restart; a busy stream beside it still gets blocks of at most max_rows."""
    data = tmp_path / "data"
    server = make_server({**EAGER, "storage": {**EAGER["storage"], "block_max_rows": 30}},
                         data_dir=data)
    quiet, busy = [], []
    for w in range(6):  # six one-minute windows, each sealed before the next is pushed
        q = [[str(T + w * 60 * 10**9 + k * 10**9), f"quiet w={w} k={k}"] for k in range(3)]
        b = [[str(T + w * 60 * 10**9 + k * 10**8), f"busy w={w} k={k}"] for k in range(25)]
        quiet += q
        busy += b
        push(server.url, [({"app": "quiet"}, q), ({"app": "busy"}, b)])
        wait_until(lambda n=len(quiet) + len(busy):
                   metric(server.url, "logstore_sealer_rows_sealed") == n, "window sealed")
    conn = sqlite3.connect(data / "logstore.db")
    per_stream = conn.execute(
        "SELECT s.labels, count(*), max(b.rows), sum(b.rows) FROM blocks b "
        "JOIN streams s ON s.id = b.stream_id GROUP BY s.labels ORDER BY s.labels").fetchall()
    conn.close()
    assert [row[1:] for row in per_stream] == [(6, 25, 150), (1, 18, 18)]  # busy, quiet
    params = {"query": '{app="quiet"}', "start": str(T), "end": str(T + 600 * 10**9),
              "limit": "100", "direction": "forward"}
    before = httpx.get(server.url + QUERY_RANGE, params=params).json()["data"]["result"]
    assert [v for s in before for v in s["values"]] == quiet
    server.stop()
    server.start()
    after = httpx.get(server.url + QUERY_RANGE, params=params).json()["data"]["result"]
    assert after == before
    assert Counter((r[2], r[3]) for r in stored(str(data / "logstore.db"))) == \
        Counter((int(ts), line) for ts, line in quiet + busy)


def test_many_quiet_streams_are_sealed_by_a_few_commits(make_server, tmp_path):
    """Hundreds of pods with a few lines each in a closed window: the sealer stores their
    small blocks many to a writer transaction (a commit each cost more than the block), and
    every line reads back the same after a restart."""
    data = tmp_path / "data"
    server = make_server({**OLD, "storage": {"sealing_enabled": True}}, data_dir=data)
    pods = 300
    streams = [({"app": "fleet", "pod": f"p{i}"},
                [[str(T + i * 10**6 + k * 10**9), f"pod p{i} line {k}"] for k in range(3)])
               for i in range(pods)]
    push(server.url, streams)
    commits = metric(server.url, "logstore_writer_commits")
    r = httpx.post(server.url + "/flush", timeout=60)
    assert r.status_code == 204, r.text
    conn = sqlite3.connect(data / "logstore.db")
    head, blocks = head_rows(conn), sealed_blocks(conn)
    conn.close()
    assert (head, blocks) == (0, pods)  # everything sealed, a block per pod
    # 900 rows in 300 blocks: a few batches, not a commit per block
    assert metric(server.url, "logstore_writer_commits") - commits < 20
    params = {"query": '{app="fleet"}', "start": str(T), "end": str(T + 600 * 10**9),
              "limit": "1000", "direction": "forward"}
    before = httpx.get(server.url + QUERY_RANGE, params=params).json()["data"]["result"]
    assert sorted(v for s in before for v in s["values"]) == \
        sorted(v for _, values in streams for v in values)
    server.stop()
    server.start()
    assert httpx.get(server.url + QUERY_RANGE, params=params).json()["data"]["result"] == before


@pytest.mark.parametrize("key, value, message", [
    ("block_window", "0s", "storage.block_window must be a positive duration"),
    ("block_max_rows", 0, "storage.block_max_rows must be between 1 and 1000000"),
    ("seal_grace_period", "-1m", "storage.seal_grace_period must not be negative"),
])
def test_bad_sealing_settings_are_refused(tmp_path, key, value, message):
    from config import ConfigError
    from tests.conftest import make_config

    with pytest.raises(ConfigError, match=re.escape(message)):
        make_config(tmp_path, {"storage": {key: value}})
