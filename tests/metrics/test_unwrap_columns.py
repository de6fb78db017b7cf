"""The logfmt unwrap shortcut over whole sealed blocks (logql/engine/unwrap_columns.py) gives
the general path's answer: value by value on lines made to trip it, window by window for
the quantiles, and query by query over sealed data with metadata, a pending delete request,
a retention cutoff, many blocks and windows that cut blocks."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from bisect import bisect_right

import numpy as np
import pytest

from tests.storage_matrix import CLICKHOUSE, clickhouse_store

import logql.engine.range as range_engine
from logql.engine.functions import sliding_quantiles
from logql.engine.unwrap_columns import window_quantiles
from logql.engine.unwrap_scan import LogfmtUnwrapScan
from logql.reading import LineColumns
from tests.helpers import JSON_HEADERS
from tests.metrics.test_unwrap_scan import TRICKY, _shortcut
from tests.storage_matrix import counts

S = 10**9
# A day ago, at the same second of the hour as before (1_700_000_000 s): on ClickHouse the
# tables' TTL and the compactor's first sweep, which may run while the lines are pushed, go
# by the real clock, not by the retention clock the fixture sets; lines years old would be
# past h2's 2-day period there, and a merge could drop them at any moment.
T0 = ((time.time_ns() // S - 86400) // 3600 * 3600 + 1_700_000_000 % 3600) * S
MORE_TRICKY = TRICKY + [
    "a=1\nlatency_ms=30", "a=1\x7flatency_ms=31", "ÿ=1 latency_ms=32", "k=ÿ latency_ms=33",
    "latency_ms=34\nb=\"x", "latency_ms=35ÿ", "latency_ms=-36.5 error=1", "level=error latency_ms=37",
    "k=\U0001F600 latency_ms=38", "latency_ms=\U0001F600", "q=\"\" latency_ms=39",
    "latency_ms=-.5", "latency_ms=1.5.6", "latency_ms=1-2", "latency_ms=--1", "latency_ms=-",
    "latency_ms=123456789012345", "latency_ms=1234567890123456", "latency_ms=0.1234567890123456789012",
    "latency_ms=1.00000000000000000000001", "latency_ms=-0.0", "latency_ms=954085567341.69085", "latency_ms=" + "1" * 300,
    "latency_ms=" + "1" * 301, "latency_ms=9007199254740993", "latency_ms=0.30000000000000004",
    "a==1 latency_ms=40", "=1 latency_ms=41", "a=b=c latency_ms=42", "a.b latency_ms=43",
    "a=b.c latency_ms=44", "latency_mslatency_ms=45", "x=latency_ms=46", "latency_ms=47=",
    "l=\"q\" latency_ms=48", "latency_ms=49\"", "latency_ms=5e", "latency_ms=4 latency_ms=x",
]


def _columns(lines: list[str], mds: list[str | None], sid: int = 1) -> LineColumns:
    parts = [line.encode("utf-8", "surrogatepass") for line in lines]
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    texts = sorted({m for m in mds if m is not None})
    index = np.array([-1 if m is None else texts.index(m) for m in mds], dtype=np.int32)
    n = len(lines)
    return LineColumns(sid, np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64),
                       b"".join(parts), offsets, index, texts)


@pytest.mark.parametrize("query", [
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms [1m]) by (host)',
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms | __error__="" [1m]) '
    'by (host)',
])
def test_a_column_reads_every_line_as_the_row_shortcut_does(query):
    shortcut, _ = _shortcut(query)
    rnd = random.Random(5)
    lines = MORE_TRICKY + [rnd.choice([" ", "\t", ""]).join(rnd.sample(MORE_TRICKY, 3))
                           for _ in range(400)]
    taken, values = shortcut.column_samples(_columns(lines, [None] * len(lines)))
    assert len(taken) == len(values) == len(lines)
    for line, took, got in zip(lines, taken.tolist(), values.tolist()):
        value = shortcut.value(line)
        assert took == (value is not None), line
        if took:
            assert repr(got) == repr(value), line
    taken = int(taken.sum())
    assert taken >= 80  # the columns were really read, on many shapes


def test_windows_of_arrays_give_the_general_quantiles():
    rnd = random.Random(9)
    for case in range(200):
        n = rnd.randint(1, 300)
        ts = np.sort(np.array([rnd.randint(0, 1000) for _ in range(n)], dtype=np.int64))
        pool = [0.0, -0.0, 1.5, 2.5, -3.0, 7.25, 1e300, -1e-300, 5e-324]
        values = np.array([rnd.choice(pool) if rnd.random() < 0.5 else rnd.uniform(-50, 50)
                           for _ in range(n)], dtype=np.float64)
        step = rnd.randint(1, 120)
        width = rnd.randint(1, step)       # range <= step: windows never overlap
        windows = [(t - width, t) for t in range(-50, 1100, step)]
        q = rnd.choice([0.0, 0.5, 0.9, 0.99, 1.0, rnd.random()])
        got = window_quantiles(q, ts, values, windows)
        tl, vl = ts.tolist(), values.tolist()
        spans = [(bisect_right(tl, lo), bisect_right(tl, hi)) for lo, hi in windows]
        want = sliding_quantiles(q, vl, spans, lambda: None)
        # the same floats, signed zeros included
        assert [repr(v) for v in got] == [repr(v) for v in want], case


def test_arrays_go_the_general_way_where_they_cannot_promise_the_same_floats():
    ts = np.arange(10, dtype=np.int64)
    values = np.arange(10, dtype=np.float64)
    assert window_quantiles(0.5, ts, values, [(0, 5), (3, 9)]) is None          # overlap
    assert window_quantiles(0.5, ts, values.copy() * np.nan, [(0, 5)]) is None  # NaN
    assert window_quantiles(1.5, ts, values, [(0, 5)]) is None                  # q > 1


# -- query by query, over sealed data ---------------------------------------------------------

STREAMS = [{"app": "a", "host": "h1"}, {"app": "a", "host": "h2"}, {"app": "a"},
           {"app": "a", "host": "h3", "env": "x"}]
VICTIM = {"app": "a", "host": "h1"}   # a delete request names its warn lines
EXPIRING = "h2"                       # retention hides its first 100 s
LINES = 400


def _body(stream: dict, rnd: random.Random) -> bytes:
    values = []
    for i in range(LINES):
        ts = str(T0 + i * S + rnd.randint(0, S // 2))
        line = rnd.choice(MORE_TRICKY) if i % 7 == 0 else (
            f"ts={i} level={rnd.choice(['info', 'warn'])} host=line-{i % 3} "
            f"latency_ms={rnd.randint(1, 900)}.{rnd.randint(0, 99)} msg=\"ok {i}\"")
        md = [None, {"trace": f"t{i % 4}"}, {"host": "from-md"}][i % 3]
        values.append([ts, line] if md is None else [ts, line, md])
    return json.dumps({"streams": [{"stream": stream, "values": values}]}).encode()


@pytest.fixture(scope="module", params=["sealed", "split", CLICKHOUSE])
def stored(request, tmp_path_factory):
    from tests.conftest import matrix_client
    state = request.param
    extra = {"limits_config": {"reject_old_samples": False, "retention_stream": [
                {"selector": f'{{host="{EXPIRING}"}}', "priority": 1, "period": "2d"}]},
             # a pending request stays pending: the cancel period is not over
             "compactor": {"retention_enabled": True, "delete_request_cancel_period": "24h"},
             # the engine runs in this process: the paths are swapped here
             "querier": {"worker_processes": 0}}
    rnd = random.Random(17)
    with matrix_client(tmp_path_factory.mktemp(f"unwrap-columns-{state}") / "data", extra,
                       state) as client:
        for stream in STREAMS:
            r = client.post("/logstore/api/v1/push", headers=JSON_HEADERS,
                            content=_body(stream, rnd))
            assert r.status_code == 204, r.text
        ctx = client.app.state.services
        # retention on, but nothing expired yet: the cutoff falls before the first line
        ctx.retention.clock = lambda: T0 - 1000 * S + 2 * 86400 * S
        before = _answer(client, CLEAN)
        # the state is the promised one before anything is compared: blocks, many of them
        client.get("/ready")                 # a read: the settler seals first
        head, sealed = counts(ctx.db.path)
        if state == CLICKHOUSE:  # every line in ClickHouse, read as Arrow columns
            assert head == sealed == 0
            assert ctx.querier.store.rows() == LINES * len(STREAMS)
        elif state == "sealed":
            assert head == 0 and sealed == LINES * len(STREAMS)
        else:
            assert head > 0 and sealed > 0
        if state != CLICKHOUSE:
            assert _blocks(ctx.db.path) >= 10
        r = client.post("/logstore/api/v1/delete", params={
            "query": '{app="a", host="h1"} |= "level=warn"', "start": str(T0 // S),
            "end": str(T0 // S + LINES)})
        assert r.status_code == 204, r.text
        ctx.retention.clock = lambda: T0 + 100 * S + 2 * 86400 * S
        yield client, before


def _blocks(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM blocks").fetchone()[0]
    finally:
        conn.close()


def stored_ids(client) -> dict[str | None, int]:
    """Stream id by host label."""
    store = clickhouse_store(client.app)
    if store is not None:
        rows = store.client.query(f"SELECT id, any(labels) FROM {store.db}.streams GROUP BY id")
    else:
        conn = sqlite3.connect(client.app.state.services.db.path)
        try:
            rows = conn.execute("SELECT id, labels FROM streams").fetchall()
        finally:
            conn.close()
    out = {}
    for sid, labels in rows:
        host = next((h for h in ("h1", "h2", "h3") if f'host="{h}"' in labels), None)
        out[host] = sid
    return out


QUERIES = [
    'quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms [1m]) by (host)',
    'quantile_over_time(0.5, {app="a"} | logfmt | unwrap latency_ms | __error__="" [37s]) '
    'by (host, env)',
    'quantile_over_time(0.99, {app="a"} | logfmt | unwrap latency_ms | __error__="" [2m]) '
    'by (host)',                                              # windows overlap
    'max_over_time({app="a"} | logfmt | unwrap latency_ms | __error__="" [90s]) by (host)',
    'stddev_over_time({app="a"} | logfmt | unwrap latency_ms | __error__="" [1m]) by (host)',
    'avg_over_time({app="a"} | logfmt | unwrap latency_ms [1m]) by (host)',  # errors: 400
]
CLEAN = ('quantile_over_time(0.9, {app="a"} | logfmt | unwrap latency_ms | __error__="" [1m]) '
         'by (host)')
STEPS = {"[37s]": "37", "[1m]": "60"}


def _answer(client, query: str):
    step = next((v for k, v in STEPS.items() if k in query), "60")
    r = client.get("/logstore/api/v1/query_range", params={
        "query": query, "start": str(T0), "end": str(T0 + LINES * S), "step": step})
    if r.status_code != 200:
        return r.status_code, r.text
    data = r.json()["data"]
    data.pop("stats")
    return r.status_code, data


@pytest.mark.parametrize("query", QUERIES)
def test_answers_over_blocks_equal_the_general_path(stored, monkeypatch, query):
    client, _ = stored
    read: list[LineColumns] = []
    real = LogfmtUnwrapScan.column_samples

    def recorded(self, lc):
        read.append(lc)
        return real(self, lc)

    monkeypatch.setattr(LogfmtUnwrapScan, "column_samples", recorded)
    fast = _answer(client, query)
    assert sum(lc.rows for lc in read) > 150   # the blocks were read as columns
    # a stream a delete request names is read as rows only, the way its filter is applied
    assert stored_ids(client)["h1"] not in {lc.stream_id for lc in read}
    monkeypatch.setattr(range_engine.LogfmtUnwrapScan, "for_plan",
                        classmethod(lambda cls, *a: None))
    general = _answer(client, query)
    assert fast == general


def test_the_delete_request_and_the_cutoff_hide_lines_from_the_columns(stored):
    client, before = stored
    status, after = _answer(client, CLEAN)
    assert status == 200 and before[0] == 200
    by_host = lambda data: {r["metric"].get("host"): r["values"] for r in data["result"]}  # noqa: E731
    was, now = by_host(before[1]), by_host(after)
    assert was["h1"] != now["h1"]                     # the warn lines of h1 are gone
    assert was["h3"] == now["h3"]                     # other streams keep every line
    assert min(t for t, _ in was[EXPIRING]) < T0 // S + 100
    assert min(t for t, _ in now[EXPIRING]) >= T0 // S + 100   # h2's first 100 s expired
