"""A needle search over thousands of streams reads the head's matching rows in one statement
over the whole range, not one per window (issue 22: each window's statement walked every
stream's index again, 100,000 streams: 68 ms a window before any row was read); the answer
is the windowed one, in either direction, with a limit, and with part of the rows sealed."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from storage import scan
from tests.helpers import JSON_HEADERS, PUSH

TENANT = "needles"
HEADERS = {"X-Scope-OrgID": TENANT}
STREAMS = 1200
NS = 10**9
# statements are traced on the server's own reader connections
CONFIG = {"auth_enabled": True, "storage": {"sealing_enabled": False},
          "querier": {"worker_processes": 0}}


def _values(i: int, now: int, minutes: range) -> list[list[str]]:
    # pod 7 logs every minute given, every other pod twice: the needle's rows spread over
    # 40 minutes, so a scan that grows its windows from one minute needs several
    if i == 7:
        return [[str(now - m * 60 * NS), f"level=info pod=7 minute={m}"] for m in minutes]
    return [[str(now - m * 60 * NS + i), f"level=info pod={i} minute={m}"]
            for m in minutes if m % 20 == 5]


def _traced(monkeypatch) -> list[str]:
    """The statements the server's own SQLite connections run from now on."""
    from storage import db as storage_db

    statements: list[str] = []
    real = storage_db.sqlite3.connect

    def connect(path, *args, **kwargs):
        conn = real(path, *args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn
    monkeypatch.setattr(storage_db.sqlite3, "connect", connect)
    return statements


def _push(client, now: int, minutes: range) -> None:
    streams = [{"stream": {"env": "prod", "pod": f"pod-{i}"},
                "values": _values(i, now, minutes)} for i in range(STREAMS)]
    streams = [s for s in streams if s["values"]]
    r = client.post(PUSH, content=json.dumps({"streams": streams}),
                    headers={**JSON_HEADERS, **HEADERS})
    assert r.status_code == 204, r.text


@pytest.fixture(params=["head", "split"])
def store(request, make_client, tmp_path, monkeypatch):
    statements = _traced(monkeypatch)
    data = tmp_path / "data"
    client = make_client(CONFIG, data_dir=data)
    now = time.time_ns()
    if request.param == "split":
        _push(client, now, range(21, 41))  # the older half sealed, the newer in the head
        assert client.post("/flush").status_code == 204
        _push(client, now, range(1, 21))
    else:
        _push(client, now, range(1, 41))
    db = sqlite3.connect(data / "logstore.db")
    # pod 7's 40 lines of a push are a pack (the head, flagged 4), every other pod's two rows
    head, blocks = db.execute(
        "SELECT (SELECT count(*) FROM (SELECT stream_id FROM entries UNION "
        "SELECT stream_id FROM blocks WHERE flags & 4)), "
        "(SELECT count(*) FROM blocks WHERE NOT flags & 4)").fetchone()
    db.close()
    # the state the test names: every stream in the head, and sealed blocks or none
    assert head == STREAMS > scan.WHOLE_RANGE_STREAMS
    assert (blocks > 0) == (request.param == "split")
    return client, now, statements, request.param


def _lines(client, now: int, query: str, limit: int, direction: str) -> list[str]:
    r = client.get("/logstore/api/v1/query_range", headers=HEADERS,
                   params={"query": query, "limit": str(limit), "direction": direction,
                           "start": str(now - 3600 * NS), "end": str(now + NS)})
    assert r.status_code == 200, r.text
    return [v[1] for s in r.json()["data"]["result"] for v in s["values"]]


def _needle(client, now: int) -> tuple[list[str], tuple[int, int]]:
    """`|= "pod=7 "` over every stream of the last hour, limit 100: its lines, and the
    (lines, bytes) its stats say were processed."""
    r = client.get("/logstore/api/v1/query_range", headers=HEADERS,
                   params={"query": '{env="prod"} |= "pod=7 "', "limit": "100",
                           "start": str(now - 3600 * NS), "end": str(now + NS)})
    assert r.status_code == 200, r.text
    body = r.json()["data"]
    summary = body["stats"]["summary"]
    return ([v[1] for s in body["result"] for v in s["values"]],
            (summary["totalLinesProcessed"], summary["totalBytesProcessed"]))


def _head_scans(statements: list[str]) -> int:
    """Statements that test the needle on the head's rows, the few of a sample left out."""
    return sum(1 for s in statements if "FROM entries" in s and "instr(line" in s
               and f"LIMIT {scan.SAMPLE_ROWS})" not in s)


def _tallies(statements: list[str]) -> list[str]:
    return [s for s in statements if "group_concat(CASE WHEN" in s]


@pytest.mark.parametrize("direction", ["backward", "forward"])
def test_the_head_is_read_once_and_the_answer_is_the_windowed_one(store, direction):
    client, now, statements, state = store
    newest_first = [f"level=info pod=7 minute={m}" for m in range(1, 41)]
    expected = newest_first if direction == "backward" else newest_first[::-1]
    del statements[:]
    assert _lines(client, now, '{env="prod"} |= "pod=7 "', 100, direction) == expected
    assert _head_scans(statements) == 1
    # with a limit: the newest (or oldest) ones, in order
    assert _lines(client, now, '{env="prod"} |= "pod=7 "', 15, direction) == expected[:15]


def test_few_streams_read_the_head_a_window_at_a_time(store):
    """Below WHOLE_RANGE_STREAMS the windows stay: each one reads few index entries, and a
    limited read that stops early reads only the newest."""
    client, now, statements, state = store
    del statements[:]
    lines = _lines(client, now, '{pod=~"pod-[0-9]"} |= "pod=7 "', 100, "backward")
    assert lines == [f"level=info pod=7 minute={m}" for m in range(1, 41)]
    assert _head_scans(statements) > 1


def test_a_rare_needle_counts_the_head_in_the_pass_that_finds_it(store):
    """With sealed blocks whose Bloom filters rule the needle out almost everywhere, or with
    too few blocks to tell and a sample of the head that holds it at most 1 in 100 times,
    the head is read once: that pass finds the needle's rows and counts every line and byte
    of the range for the stats, which are the same as counting them separately."""
    client, now, statements, state = store
    pushed = [v[1] for i in range(STREAMS) for v in _values(i, now, range(1, 41))]
    del statements[:]
    lines, processed = _needle(client, now)
    assert lines == [f"level=info pod=7 minute={m}" for m in range(1, 41)]
    assert processed == (len(pushed), sum(len(line.encode()) for line in pushed))
    tallied = _tallies(statements)
    counted = [s for s in statements if s.startswith("SELECT count(*), coalesce(sum(length(")
               and s not in tallied]
    sampled = [s for s in statements if f"LIMIT {scan.SAMPLE_ROWS})" in s]
    assert len(tallied) == 1 and counted == []
    # the head state has no blocks to judge by, the split one blocks enough
    assert len(sampled) == (1 if state == "head" else 0)


def test_a_scan_that_stops_at_its_limit_counts_the_head_the_tally_read(store):
    """The tally reads the whole range's head before the scan stops at its limit: the stats
    count that range (the older sealed blocks of it included), not a part of it counted
    again."""
    client, now, statements, state = store
    pushed = [v[1] for i in range(STREAMS) for v in _values(i, now, range(1, 41))]
    del statements[:]
    r = client.get("/logstore/api/v1/query_range", headers=HEADERS,
                   params={"query": '{env="prod"} |= "pod=7 "', "limit": "15",
                           "start": str(now - 3600 * NS), "end": str(now + NS)})
    assert r.status_code == 200, r.text
    body = r.json()["data"]
    assert [v[1] for s in body["result"] for v in s["values"]] == \
        [f"level=info pod=7 minute={m}" for m in range(1, 16)]
    summary = body["stats"]["summary"]
    assert len(_tallies(statements)) == 1
    assert (summary["totalLinesProcessed"], summary["totalBytesProcessed"]) == \
        (len(pushed), sum(len(line.encode()) for line in pushed))


def test_a_common_needle_in_the_sample_reads_the_head_a_window_at_a_time(store):
    """A needle the sealed blocks hold nearly everywhere, or with too few blocks to tell,
    that a sample of the head holds more than 1 in 100 times: no tally (it would read every
    row however soon the limit is met); the windows find the newest rows."""
    client, now, statements, state = store
    del statements[:]
    r = client.get("/logstore/api/v1/query_range", headers=HEADERS,
                   params={"query": '{env="prod"} |= "level=info"', "limit": "5",
                           "start": str(now - 3600 * NS), "end": str(now + NS)})
    assert r.status_code == 200, r.text
    got = sorted(((int(v[0]), v[1]) for s in r.json()["data"]["result"] for v in s["values"]),
                 reverse=True)
    pushed = sorted(((int(ts), line) for i in range(STREAMS)
                     for ts, line in _values(i, now, range(1, 41))), reverse=True)
    assert got == pushed[:5]
    sampled = [s for s in statements if f"LIMIT {scan.SAMPLE_ROWS})" in s]
    assert len(sampled) == (1 if state == "head" else 0)
    assert _tallies(statements) == []


def test_streams_created_between_a_tenants_own_read_as_ranges_stay_the_other_tenants(
        make_client, tmp_path, monkeypatch):
    """A tenant's 1,200 streams created in two pushes with another tenant's 600 between them
    have ids in two runs, which the whole-range statements test as two ranges of ids: the
    other tenant's lines, in between, hold the same needle and are neither returned nor
    counted."""
    statements = _traced(monkeypatch)
    client = make_client(CONFIG, data_dir=tmp_path / "data")
    now = time.time_ns()

    def push(tenant: str, pods: range, text: str) -> list[str]:
        streams = [{"stream": {"env": "prod", "pod": f"pod-{i}"},
                    "values": [[str(now - m * 60 * NS + i), f"{text} pod={i} minute={m}"]
                               for m in (5, 25)]} for i in pods]
        r = client.post(PUSH, content=json.dumps({"streams": streams}),
                        headers={**JSON_HEADERS, "X-Scope-OrgID": tenant})
        assert r.status_code == 204, r.text
        return [v[1] for s in streams for v in s["values"]]

    mine = push(TENANT, range(600), "mine")
    push("other", range(600), "theirs")
    mine += push(TENANT, range(600, 1200), "mine")
    db = sqlite3.connect(tmp_path / "data" / "logstore.db")
    ids = [i for (i,) in db.execute("SELECT id FROM streams WHERE tenant = ? ORDER BY id",
                                    (TENANT,))]
    others = [i for (i,) in db.execute("SELECT id FROM streams WHERE tenant = 'other'")]
    db.close()
    # the state the test names: the other tenant's ids lie between this tenant's two runs
    assert len(ids) == 1200 and ids[599] < min(others) < max(others) < ids[600]
    del statements[:]
    lines, processed = _needle(client, now)
    assert lines == ["mine pod=7 minute=5", "mine pod=7 minute=25"]
    assert processed == (len(mine), sum(len(line.encode()) for line in mine))
    ranged = [s for s in statements if "FROM entries" in s and "BETWEEN" in s]
    assert ranged and all(s.count("BETWEEN") == 2 for s in ranged)


@pytest.mark.parametrize("limit", [5, 1500])
def test_a_limited_read_over_many_streams_takes_few_head_rows_first(store, limit):
    """A broad selector with a limit: the head's first window takes at most
    LIMITED_FIRST_ROWS rows (SQLite sorts every row of a window over thousands of streams to
    return the first, and there were 16,001 of them), each next window 4x more; the answer
    is the newest rows all the same. The read ends just after minute 5, where every pod has
    a line: its first window holds 1,200 rows and is cut at the first 1,001."""
    from storage.reader import LIMITED_FIRST_ROWS

    client, now, statements, state = store
    end = now - 5 * 60 * NS + NS
    pushed = sorted(((int(ts), line) for i in range(STREAMS)
                     for ts, line in _values(i, now, range(1, 41)) if int(ts) < end),
                    reverse=True)
    # the state the test names: more rows in the first window (60 s) than it may take
    assert sum(1 for ts, _ in pushed if ts >= end - 60 * NS) > LIMITED_FIRST_ROWS
    del statements[:]
    r = client.get("/logstore/api/v1/query_range", headers=HEADERS,
                   params={"query": '{env="prod"}', "limit": str(limit),
                           "start": str(now - 3600 * NS), "end": str(end)})
    assert r.status_code == 200, r.text
    got = sorted(((int(v[0]), v[1]) for s in r.json()["data"]["result"] for v in s["values"]),
                 reverse=True)
    assert len(pushed) > limit and got == pushed[:limit]
    head_windows = [s for s in statements if s.startswith("SELECT id, stream_id, ts, line")
                    and "ORDER BY ts DESC" in s]
    assert head_windows[0].endswith(f"LIMIT {LIMITED_FIRST_ROWS + 1}")
