"""The log deletion API (spec/http-api.md section 14): every error text, the user's story on
the loghub OpenSSH set (lines gone from log queries and counts at once, and from disk after
the cancel period), cancelling, splitting, tenants, cache generation numbers."""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections import Counter
from datetime import datetime, timezone

import pytest

from storage import deletes
from tests.conftest import loghub_lines
from tests.helpers import HEAD_ROWS, JSON_HEADERS, PUSH, SEALED_BLOCKS, push_body, stored

DELETE = "/logstore/api/v1/delete"
H = 3600 * 10**9
T0 = 1_700_000_000 * 10**9  # 2023-11-14T22:13:20Z
ON = {"limits_config": {"reject_old_samples": False},
      "compactor": {"retention_enabled": True}}


def sec(ns: int) -> str:
    return str(ns // 10**9)


@pytest.fixture
def client(make_client):
    c = make_client(ON)
    clock = {"now": T0 + 10 * H}
    c.app.state.services.deletions.clock = lambda: clock["now"]
    c.clock = clock
    return c


@pytest.mark.parametrize("config", [
    {"limits_config": {"reject_old_samples": False}},
    {"compactor": {"retention_enabled": True}, "limits_config": {"deletion_mode": "disabled"}},
])
def test_disabled_answers_retention_is_not_enabled(make_client, config):
    c = make_client(config)
    for method in ("POST", "PUT", "GET", "DELETE"):
        r = c.request(method, DELETE, params={"query": '{a="b"}', "start": sec(T0),
                                               "request_id": "x"})
        assert (r.status_code, r.text) == (400, "Retention is not enabled\n"), method


@pytest.mark.parametrize("params, text", [
    ({"start": sec(T0)}, "query not set"),
    ({"query": '{a="b"', "start": sec(T0)}, "invalid query expression"),
    ({"query": 'count_over_time({a="b"}[1m])', "start": sec(T0)}, "invalid query expression"),
    ({"query": '{a="b"} | json', "start": sec(T0)}, "invalid query expression"),
    ({"query": '{a="b"}'}, "start time not set"),
    ({"query": '{a="b"}', "start": "12345"},
     "invalid start time: require unix seconds or RFC3339 format"),
    ({"query": '{a="b"}', "start": sec(T0), "end": "yesterday"},
     "invalid end time: require unix seconds or RFC3339 format"),
    ({"query": '{a="b"}', "start": sec(T0), "end": sec(T0 + 11 * H)},
     "deletes in the future are not allowed"),
    ({"query": '{a="b"}', "start": sec(T0 + H), "end": sec(T0 + H)},
     "start time can't be greater than or equal to end time"),
    ({"query": '{a="b"} |= "x"', "start": sec(T0), "end": sec(T0 + 2 * H),
      "max_interval": "1d"}, "invalid max_interval: valid time units are 's', 'm', 'h'"),
    ({"query": '{a="b"} |= "x"', "start": sec(T0 - 48 * H), "end": sec(T0 + 2 * H),
      "max_interval": "25h"}, "max_interval can't be greater than 24h0m0s"),
    ({"query": '{a="b"} |= "x"', "start": sec(T0), "end": sec(T0 + H),
      "max_interval": "2h"}, "max_interval can't be greater than the interval to be deleted "
                             "(1h0m0s)"),
])
def test_create_errors(client, params, text):
    r = client.post(DELETE, params=params)
    assert (r.status_code, r.text) == (400, text + "\n")


def test_cancel_errors_and_tenants(make_client):
    c = make_client({**ON, "auth_enabled": True})
    a, b = {"X-Scope-OrgID": "a"}, {"X-Scope-OrgID": "b"}
    r = c.post(DELETE, params={"query": '{app="x"}', "start": "2023-11-14T00:00:00Z",
                               "end": "2023-11-14T01:00:00Z"}, headers=a)
    assert r.status_code == 204
    rid = r.headers["X-Delete-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{8}", rid)
    assert c.get(DELETE, headers=b).json() == []
    r = c.delete(DELETE, params={"request_id": rid}, headers=b)
    assert (r.status_code, r.text) == (404, "could not find delete request with given id\n")
    got = c.get(DELETE, headers=a).json()
    assert [(g["request_id"], g["start_time"], g["end_time"], g["query"], g["status"],
             g["user_id"]) for g in got] == [
        (rid, 1699920000, 1699923600, '{app="x"}', "received", "")]
    assert c.delete(DELETE, params={"request_id": rid}, headers=a).status_code == 204
    assert c.get(DELETE, headers=a).json() == []
    assert c.post(DELETE, params={"query": '{app="x"}', "start": "1"},
                  headers={}).status_code == 401


def test_split_requests_report_progress_and_need_force(client):
    r = client.post(DELETE, params={"query": '{app="x"} |= "secret"', "start": sec(T0),
                                    "end": sec(T0 + 4 * H), "max_interval": "1h"})
    assert r.status_code == 204
    rid = r.headers["X-Delete-Request-ID"]
    conn = sqlite3.connect(client.app.state.services.db.path)
    assert conn.execute("SELECT count(*) FROM delete_requests").fetchone()[0] == 4
    conn.execute("UPDATE delete_requests SET processed = 1 WHERE seq = 0")
    conn.commit()
    conn.close()
    assert client.get(DELETE).json()[0]["status"] == "25% Complete"
    r = client.delete(DELETE, params={"request_id": rid})
    assert r.status_code == 400
    assert r.text == ("Cancellation of partially completed delete request or delete request "
                      "past the deadline of 24h0m0s since its creation is not allowed. To "
                      "force, use the ?force query parameter\n")
    assert client.delete(DELETE, params={"request_id": rid, "force": "true"}).status_code == 204


def test_cache_generation_numbers(client):
    path = "/logstore/api/v1/cache/generation_numbers"
    first = client.get(path).json()
    assert isinstance(first, str)
    assert client.post(path + "/increase").status_code == 204
    assert client.get(path).json() == str(int(first) + 1)
    client.post(DELETE, params={"query": '{app="x"}', "start": sec(T0)})
    assert client.get(path).json() == str(int(first) + 2)


def _openssh() -> list[tuple[int, str]]:
    out = []
    for line in loghub_lines("OpenSSH"):
        dt = datetime.strptime("2023 " + line[:15], "%Y %b %d %H:%M:%S")
        out.append((int(dt.replace(tzinfo=timezone.utc).timestamp()) * 10**9, line))
    return out


def _lines(client, start: int, end: int) -> Counter:
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{job="openssh"}', "start": str(start), "end": str(end), "limit": "5000"})
    assert r.status_code == 200, r.text
    return Counter((int(ts), line) for s in r.json()["data"]["result"] for ts, line in s["values"])


def _count(client, at: int) -> int:
    r = client.get("/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({job="openssh"}[2d]))', "time": str(at)}).json()
    return int(r["data"]["result"][0]["value"][1])


def test_delete_story_on_openssh(make_client):
    c = make_client({**ON, "limits_config": {"reject_old_samples": False,
                                             "max_entries_limit_per_query": 10000}})
    entries = _openssh()
    for i in range(0, len(entries), 500):
        body = push_body({"job": "openssh"}, [[str(ts), l] for ts, l in entries[i:i + 500]])
        assert c.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    everything = Counter(set(entries))  # exact repeats are stored once
    day = int(datetime(2023, 12, 10, tzinfo=timezone.utc).timestamp()) * 10**9
    now = day + 30 * H
    deletions = c.app.state.services.deletions
    deletions.clock = lambda: now
    lo, hi = day - H, day + 25 * H
    assert _lines(c, lo, hi) == everything

    r = c.post(DELETE, params={"query": '{job="openssh"} |= "Failed password for root"',
                               "start": sec(day), "end": sec(day + 24 * H - 10**9)})
    assert r.status_code == 204
    gone = Counter({k: v for k, v in everything.items() if "Failed password for root" in k[1]})
    assert 300 < sum(gone.values()) < 400
    kept = everything - gone
    assert _lines(c, lo, hi) == kept
    assert _count(c, hi) == sum(kept.values())

    # sealed: same answers
    assert c.post("/flush").status_code == 204
    assert _lines(c, lo, hi) == kept
    assert _count(c, hi) == sum(kept.values())

    # within the cancel period the compactor leaves it; after it, the lines leave the disk
    compactor = c.app.state.services.compactor
    c.blocking_portal.call(compactor.run_once)
    assert c.get(DELETE).json()[0]["status"] == "received"
    now += 25 * H
    c.blocking_portal.call(compactor.run_once)
    assert c.get(DELETE).json()[0]["status"] == "processed"
    on_disk = Counter((r[2], r[3]) for r in stored(c.app.state.services.db.path))
    assert on_disk == kept
    assert _lines(c, lo, hi) == kept
    assert _count(c, hi) == sum(kept.values())
    r = c.delete(DELETE, params={"request_id": c.get(DELETE).json()[0]["request_id"]})
    assert (r.status_code, r.text) == (
        400, "deletion of request which is in process or already processed is not allowed\n")
    metrics = c.get("/metrics").text
    assert 'logstore_compactor_delete_requests{status="processed"} 1.0' in metrics
    assert f"logstore_compactor_deleted_lines_total {float(sum(gone.values()))}" in metrics
    gone_bytes = sum(len(line.encode()) * n for (_, line), n in gone.items())
    assert f"logstore_compactor_deleted_bytes_total {float(gone_bytes)}" in metrics


def test_delete_range_is_inclusive_and_cancel_brings_lines_back(client):
    values = [[str(T0 + i * 10**9), f"line {i} secret" if i % 2 else f"line {i}"]
              for i in range(10)]
    client.post(PUSH, content=push_body({"app": "x"}, values), headers=JSON_HEADERS)
    r = client.post(DELETE, params={"query": '{app="x"} |= "secret"', "start": sec(T0 + 3 * 10**9),
                                    "end": sec(T0 + 7 * 10**9)})
    rid = r.headers["X-Delete-Request-ID"]

    def visible():
        r = client.get("/logstore/api/v1/query_range", params={
            "query": '{app="x"}', "start": str(T0), "end": str(T0 + 20 * 10**9),
            "direction": "forward"}).json()["data"]["result"]
        return [v[1] for s in r for v in s["values"]]

    assert visible() == [f"line {i}" + (" secret" if i % 2 else "") for i in range(10)
                         if not (i % 2 and 3 <= i <= 7)]
    assert client.delete(DELETE, params={"request_id": rid}).status_code == 204
    assert len(visible()) == 10


def test_streams_a_delete_empties_leave_labels_and_series(client):
    for app, lines in (("x", ["only secret here", "secret again"]),
                       ("y", ["secret", "public"])):
        values = [[str(T0 + i * 10**9), line] for i, line in enumerate(lines)]
        body = push_body({"app": app, "team": f"t-{app}"}, values)
        assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    rng = {"start": sec(T0 - H), "end": sec(T0 + H)}

    def seen():
        series = client.get("/logstore/api/v1/series", params={"match[]": '{app=~".+"}', **rng})
        names = client.get("/logstore/api/v1/labels", params=rng)
        teams = client.get("/logstore/api/v1/label/team/values", params=rng)
        by_query = client.get("/logstore/api/v1/label/app/values",
                              params={"query": '{team=~"t-.*"}', **rng})
        return (series.json()["data"], names.json()["data"], teams.json()["data"],
                by_query.json()["data"])

    x = {"app": "x", "service_name": "x", "team": "t-x"}
    y = {"app": "y", "service_name": "y", "team": "t-y"}
    names = ["app", "service_name", "team"]
    both = ([x, y], names, ["t-x", "t-y"], ["x", "y"])
    assert seen() == both
    r = client.post(DELETE, params={"query": '{app=~"x|y"} |= "secret"', "start": sec(T0),
                                    "end": sec(T0 + 60 * 10**9)})
    assert r.status_code == 204
    only_y = ([y], names, ["t-y"], ["y"])
    assert seen() == only_y
    assert client.post("/flush").status_code == 204  # sealed: the same
    assert seen() == only_y
    # a range that misses the request's lines: app="x" has nothing there either way
    early = client.get("/logstore/api/v1/series", params={"match[]": '{app="x"}',
                                                          "start": sec(T0 - H),
                                                          "end": sec(T0 - 1)})
    assert early.json()["data"] == []
    client.clock["now"] += 25 * H
    compactor = client.app.state.services.compactor
    client.blocking_portal.call(compactor.run_once)
    assert client.get(DELETE).json()[0]["status"] == "processed"
    assert seen() == only_y


def test_cancelled_delete_brings_streams_back_to_series(client):
    values = [[str(T0), "secret"]]
    client.post(PUSH, content=push_body({"app": "x"}, values), headers=JSON_HEADERS)
    rng = {"match[]": '{app="x"}', "start": sec(T0 - H), "end": sec(T0 + H)}
    r = client.post(DELETE, params={"query": '{app="x"}', "start": sec(T0), "end": sec(T0 + H)})
    assert r.status_code == 204, r.text
    assert client.get("/logstore/api/v1/series", params=rng).json()["data"] == []
    client.delete(DELETE, params={"request_id": r.headers["X-Delete-Request-ID"]})
    assert client.get("/logstore/api/v1/series", params=rng).json()["data"] == [
        {"app": "x", "service_name": "x"}]


def test_sigkill_during_compaction_then_restart(make_server, tmp_path):
    import time as _time

    import httpx

    config = {"limits_config": {"reject_old_samples": False},
              "compactor": {"retention_enabled": True, "compaction_interval": "1s",
                            "delete_request_cancel_period": "0s"},
              "storage": {"block_window": "1m", "seal_grace_period": "0s",
                          "block_max_rows": 40}}
    data = tmp_path / "data"
    server = make_server(config, data_dir=data)
    from tests.helpers import synthetic_lines

    lines = synthetic_lines(2000)  # volume only: no dependence on the corpus
    entries = [(T0 + (r * len(lines) + i) * 10**8, f"{line} r{r}")
               for r in range(6) for i, line in enumerate(lines)]
    for i in range(0, len(entries), 1000):
        body = push_body({"app": "k"}, [[str(ts), l] for ts, l in entries[i:i + 1000]])
        assert httpx.post(server.url + PUSH, content=body, headers=JSON_HEADERS,
                          timeout=60).status_code == 204
    assert httpx.post(server.url + "/flush", timeout=120).status_code == 204
    r = httpx.post(server.url + DELETE, params={"query": '{app="k"} |= "kernel"',
                                                "start": sec(T0), "end": sec(T0 + 2 * H)})
    assert r.status_code == 204
    kept = Counter((ts, l) for ts, l in entries if "kernel" not in l)
    assert len(kept) < len(entries)

    def deleted() -> float:
        m = re.search(r"^logstore_compactor_deleted_lines_total (\S+)$",
                      httpx.get(server.url + "/metrics").text, re.M)
        return float(m.group(1)) if m else 0.0

    deadline = _time.monotonic() + 60
    while deleted() == 0:  # polling the compactor's progress, not waiting for time
        assert _time.monotonic() < deadline, "the compactor never started"
    server.kill()
    conn = sqlite3.connect(data / "logstore.db")
    unprocessed = conn.execute("SELECT count(*) FROM delete_requests WHERE processed = 0"
                               ).fetchone()[0]
    conn.close()
    assert unprocessed > 0, "the kill came after the request was processed: it proved nothing"
    server.start()

    def visible() -> Counter:
        r = httpx.get(server.url + "/logstore/api/v1/query_range", params={
            "query": '{app="k"}', "start": str(T0), "end": str(T0 + 2 * H), "limit": "5000",
            "direction": "forward"}, timeout=60)
        return Counter((int(ts), l) for s in r.json()["data"]["result"] for ts, l in s["values"])

    def status() -> str:
        return httpx.get(server.url + DELETE).json()[0]["status"]

    r = httpx.get(server.url + "/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({app="k"}[1d]))', "time": str(T0 + 2 * H)}).json()
    assert int(r["data"]["result"][0]["value"][1]) == len(kept)
    deadline = _time.monotonic() + 60
    while status() != "processed":  # the restarted compactor finishes the request
        assert _time.monotonic() < deadline, "the request was never processed"
    assert Counter((r[2], r[3]) for r in stored(str(data / "logstore.db"))) == kept
    r = httpx.get(server.url + "/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({app="k"}[1d]))', "time": str(T0 + 2 * H)}).json()
    assert int(r["data"]["result"][0]["value"][1]) == len(kept)
    assert sum(visible().values()) == min(5000, len(kept))


@pytest.mark.parametrize("sealed", [False, True], ids=["head", "sealed"])
def test_a_broad_delete_reads_per_batch_of_streams_not_per_stream(client, sealed):
    """Issue 22: a piece was two reads per matched stream (its head rows, its blocks) and
    one more per stream's blocks: over 20,000 pods a needle's delete took 29-34 s. Over 600
    pods: a few reads, and only the needle's lines leave."""
    n = 600
    body = json.dumps({"streams": [
        {"stream": {"job": "del", "pod": f"pod-{i}"},
         "values": [[str(T0 + k * 60 * 10**9 + i), f"pod={i} k={k}"] for k in range(3)]}
        for i in range(n)]})
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    if sealed:
        assert client.post("/flush").status_code == 204
    conn = sqlite3.connect(client.app.state.services.db.path)
    # the state the test names: every line in the head, or every line sealed
    held = conn.execute(f"SELECT {HEAD_ROWS}, {SEALED_BLOCKS}").fetchone()
    assert held == ((0, n) if sealed else (3 * n, 0))
    conn.close()
    r = client.post(DELETE, params={"query": '{job="del"} |= "pod=7 "', "start": sec(T0),
                                    "end": sec(T0 + H)})
    assert r.status_code == 204
    client.clock["now"] += 25 * H
    ctx = client.app.state.services
    reads = []
    real_read = ctx.db.read

    async def counted(fn, *args):
        reads.append(fn)
        return await real_read(fn, *args)

    ctx.db.read = counted
    try:
        removed = client.blocking_portal.call(ctx.compactor.run_once)
    finally:
        ctx.db.read = real_read
    assert removed == 3
    assert len(reads) <= 12, len(reads)          # the old code: 1,200 (head), 1,800 (sealed)
    r = client.get("/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({job="del"}[2h]))', "time": str(T0 + H)})
    assert r.json()["data"]["result"][0]["value"][1] == str(3 * n - 3)
    conn = sqlite3.connect(ctx.db.path)
    lines = conn.execute(f"SELECT {HEAD_ROWS} + (SELECT coalesce(sum(rows), 0) FROM blocks "
                         "WHERE NOT flags & 4)").fetchone()[0]
    conn.close()
    assert lines == 3 * n - 3                    # off the disk, not only hidden


def _pods(client, n: int) -> None:
    """n pods of 3 lines each (k=0..2), every line in the head."""
    body = json.dumps({"streams": [
        {"stream": {"job": "del", "pod": f"pod-{i}"},
         "values": [[str(T0 + k * 60 * 10**9 + i), f"pod={i} k={k}"] for k in range(3)]}
        for i in range(n)]})
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    conn = sqlite3.connect(client.app.state.services.db.path)
    assert conn.execute(f"SELECT {HEAD_ROWS}, {SEALED_BLOCKS}").fetchone() == (3 * n, 0)
    conn.close()


def _left_after_delete_of_k1(client, n: int) -> tuple[int, int]:
    """(lines `|= "k=1"` still counts, lines on disk) once the compactor has run."""
    r = client.get("/logstore/api/v1/query", params={
        "query": 'sum(count_over_time({job="del"} |= "k=1" [2h]))', "time": str(T0 + H)})
    result = r.json()["data"]["result"]
    conn = sqlite3.connect(client.app.state.services.db.path)
    on_disk = conn.execute(f"SELECT {HEAD_ROWS} + (SELECT coalesce(sum(rows), 0) FROM blocks "
                           "WHERE NOT flags & 4)").fetchone()[0]
    conn.close()
    return (int(result[0]["value"][1]) if result else 0), on_disk


def _delete_k1(client) -> None:
    r = client.post(DELETE, params={"query": '{job="del"} |= "k=1"', "start": sec(T0),
                                    "end": sec(T0 + H)})
    assert r.status_code == 204
    client.clock["now"] += 25 * H


def test_a_broad_delete_removes_many_streams_head_rows_to_a_commit(client):
    """Issue 22: the head rows a piece picked were removed by one writer job, and so one
    commit, per stream: a line of each of 20,000 pods took 20,000 commits (7 s). Over 600
    pods: a commit or two for all their head rows."""
    n = 600
    _pods(client, n)
    _delete_k1(client)
    ctx = client.app.state.services
    commits = ctx.db.commits
    assert client.blocking_portal.call(ctx.compactor.run_once) == n
    assert ctx.db.commits - commits <= 12, ctx.db.commits - commits  # the old code: 606
    assert _left_after_delete_of_k1(client, n) == (0, 2 * n)


def test_head_rows_sealed_after_they_were_read_are_deleted_from_their_block(client,
                                                                          monkeypatch):
    """The sealer may move the picked head rows into a block between the compactor's read
    of them and its write: the write then finds them gone. They must still go, from that
    block (they stayed, and the request counted as processed)."""
    n = 50
    _pods(client, n)
    _delete_k1(client)
    ctx = client.app.state.services
    real_blocks_overlapping = deletes.blocks_overlapping
    sealed = []

    def then_sealed(conn, *args):
        found = real_blocks_overlapping(conn, *args)
        if sealed:
            return found
        # the read of the head rows and then the blocks done, on this reader thread while
        # the compactor awaits it: the sealer runs to the end
        client.blocking_portal.call(functools.partial(ctx.sealer.seal_due, everything=True))
        held = sqlite3.connect(ctx.db.path)
        sealed.append(held.execute(f"SELECT {HEAD_ROWS}, {SEALED_BLOCKS} > 0").fetchone())
        held.close()
        return found

    monkeypatch.setattr(deletes, "blocks_overlapping", then_sealed)
    removed = client.blocking_portal.call(ctx.compactor.run_once)
    assert sealed == [(0, 1)]            # the state the test names: the head sealed meanwhile
    assert removed == n
    assert _left_after_delete_of_k1(client, n) == (0, 2 * n)
