"""Log and metric queries evaluated in query worker processes (services/read/query_pool.py),
against real servers: the answers are those of the server's own reader threads, a range
query is split over the workers, a query whose client went away stops in its worker, and
a worker that dies fails only its own queries and is replaced."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers import (parent_pid, process_ended, query_worker_pids, server_of,
                           zygote_pids)
from tests.read.test_query_limits import (HOUR, SLOW, _metric, _push_slow_data, _slow_query,
                                         _wait_for, in_thread)

NS = 10**9
TENANT = {"X-Scope-OrgID": "w"}
BASE = {"auth_enabled": True, "querier": {"multi_tenant_queries_enabled": True},
        "limits_config": {"max_query_series": 40}}


def _push(url: str, now: int) -> None:
    streams = []
    for app in ("api", "web", "db"):
        values = [[str(now - HOUR + i * 7 * NS + ord(app[0])),
                   f'level={("info", "warn", "error")[i % 3]} app={app} n={i} '
                   f'latency_ms={i % 97}.{i % 10} user=u{i % 50}']
                  for i in range(500)]
        streams.append({"stream": {"app": app, "env": "prod"}, "values": values})
    for tenant in ("w", "other"):
        r = httpx.post(url + "/logstore/api/v1/push", json={"streams": streams},
                       headers={"X-Scope-OrgID": tenant})
        assert r.status_code == 204, r.text


def _queries(now: int) -> list[tuple[str, dict, dict]]:
    span = {"start": str(now - HOUR), "end": str(now)}
    return [
        ("query_range", {"query": '{env="prod"} |= "n=4"', "limit": "50", **span}, TENANT),
        ("query_range", {"query": '{app="api"} | logfmt | level="warn"', "limit": "20",
                         "direction": "forward", **span}, TENANT),
        # a log result comes from a worker as its JSON text, categorized too
        ("query_range", {"query": '{app="web"} | logfmt | n > 490', "limit": "5", **span},
         {**TENANT, "X-Loki-Response-Encoding-Flags": "categorize-labels"}),
        ("query_range", {"query": 'sum by (level) (count_over_time({env="prod"} | logfmt [5m]))',
                         "step": "60", **span}, TENANT),
        ("query_range", {"query": 'quantile_over_time(0.9, {env="prod"} | logfmt '
                                  '| unwrap latency_ms [10m]) by (app)', "step": "30", **span},
         TENANT),
        ("query_range", {"query": 'rate({app="web"}[1m]) * 60 + 1', "step": "120", **span},
         TENANT),
        ("query_range", {"query": "vector(3)", "step": "60", **span}, TENANT),
        ("query", {"query": 'topk(2, sum by (app) (count_over_time({env="prod"}[1h])))',
                   "time": str(now)}, TENANT),
        # a multi-tenant read and a series-limit error answer the same too
        ("query_range", {"query": 'sum by (__tenant_id__) (count_over_time({env="prod"}[5m]))',
                         "step": "300", **span}, {"X-Scope-OrgID": "w|other"}),
        ("query_range", {"query": 'count_over_time({env="prod"} | logfmt | keep user [5m])',
                         "step": "300", **span}, TENANT),
    ]


def _answers(url: str, now: int) -> list[tuple[int, object]]:
    out = []
    for path, params, headers in _queries(now):
        r = httpx.get(f"{url}/logstore/api/v1/{path}", params=params, headers=headers,
                      timeout=60)
        body = r.json() if r.status_code == 200 else r.text
        if isinstance(body, dict):
            body["data"].pop("stats", None)
        out.append((r.status_code, body))
    return out


def test_workers_answer_as_the_reader_threads_do(make_server, tmp_path):
    now = time.time_ns() - time.time_ns() % (60 * NS)
    data = tmp_path / "data"
    threads = make_server({**BASE, "querier": {**BASE["querier"], "worker_processes": 0}},
                          data_dir=data)
    _push(threads.url, now)
    expected = _answers(threads.url, now)
    assert "logstore_query_workers " not in httpx.get(threads.url + "/metrics").text
    threads.stop()

    workers = make_server(BASE, data_dir=data)
    assert _metric(workers.url, "logstore_query_workers_started_total") == 0
    got = _answers(workers.url, now)
    # every range query of 30 steps or more was split over both workers
    assert _metric(workers.url, "logstore_query_workers_started_total") == 2
    assert [status for status, _ in got] == [200] * 9 + [400]
    assert "maximum number of series (40) reached" in got[-1][1]
    assert all(body["data"]["result"] for _, body in got[:-1]), got
    for (query, *_), want, have in zip(_queries(now), expected, got):
        assert have == want, query


def test_a_query_whose_client_left_stops_in_its_worker(make_server):
    srv = make_server({"auth_enabled": True, "limits_config": {"query_timeout": "10m"},
                       "querier": {"worker_processes": 1}})
    now = time.time_ns()
    _push_slow_data(srv.url, "a", now)
    query = httpx.Request("GET", srv.url + "/logstore/api/v1/query_range", params={
        "query": SLOW, "start": str(now - HOUR), "end": str(now), "step": "1"}).url
    with socket.create_connection(("127.0.0.1", srv.port)) as sock:
        sock.sendall(f"GET {query.raw_path.decode()} HTTP/1.1\r\nHost: x\r\n"
                     f"X-Scope-OrgID: a\r\n\r\n".encode())
        # minutes of work, in the worker
        _wait_for(lambda: _metric(srv.url, "logstore_query_worker_jobs") == 1)
    # the client went away: the evaluation ends there within moments
    _wait_for(lambda: _metric(srv.url, "logstore_query_worker_jobs") == 0, seconds=15)
    assert _metric(srv.url, "logstore_query_reads_cancelled_total") == 1
    r = httpx.get(srv.url + "/logstore/api/v1/query", headers={"X-Scope-OrgID": "a"},
                  params={"query": 'count_over_time({job="x"}[2h])', "time": str(now)})
    assert r.json()["data"]["result"][0]["value"][1] == "20000"


def test_a_worker_killed_mid_query_fails_that_query_alone(make_server):
    srv = make_server({"auth_enabled": True, "limits_config": {"query_timeout": "10m"},
                       "querier": {"worker_processes": 1}})
    now = time.time_ns()
    _push_slow_data(srv.url, "a", now)
    thread, answer = in_thread(lambda: _slow_query(srv.url, "a", now, timeout=120))
    try:
        # the job may wait in the pipe while the worker is forked: it runs once it is ready
        _wait_for(lambda: _metric(srv.url, "logstore_query_worker_jobs") == 1
                  and _metric(srv.url, "logstore_query_workers") == 1)
        pids = query_worker_pids(group=srv.proc.pid)
        assert len(pids) == 1, pids
        os.kill(pids[0], signal.SIGKILL)
    finally:
        thread.join()
    r = answer[0]
    assert isinstance(r, httpx.Response), r
    assert r.status_code == 500 and r.text.startswith("Internal Server Error (request id"), \
        r.text
    # the next query starts another worker and is answered
    r = httpx.get(srv.url + "/logstore/api/v1/query", headers={"X-Scope-OrgID": "a"},
                  params={"query": 'count_over_time({job="x"}[2h])', "time": str(now)})
    assert r.status_code == 200, r.text
    assert json.loads(r.text)["data"]["result"][0]["value"][1] == "20000"
    assert _metric(srv.url, "logstore_query_workers_lost_total") == 1
    assert _metric(srv.url, "logstore_query_workers_started_total") == 2
    assert query_worker_pids(group=srv.proc.pid) not in ([], pids)


def _query_worker_modules() -> set[str]:
    """The modules a query worker process holds once it has started (imported alone, in a
    process of its own)."""
    out = subprocess.run(
        [sys.executable, "-c", "import json, sys, services.read.worker_zygote, "
                               "services.read.query_worker; "
                               "print(json.dumps(sorted(sys.modules)))"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=True)
    modules = set(json.loads(out.stdout))
    assert "services.read.query_worker" in modules and "services.read.readers" in modules
    return modules


def test_a_query_worker_does_not_load_the_metrics_exporter():
    """A worker never answers a scrape: prometheus_client (and the http.server it brings)
    would be about 3 MB of each worker's memory, imported through the services it shares
    with the server, which declare their scrape collectors in services/runtime/metrics.py."""
    assert not {m for m in _query_worker_modules() if m.split(".")[0] == "prometheus_client"}


def test_a_query_worker_imports_no_event_loop_and_no_upkeep_service():
    """A worker holds what it evaluates with, not the server's services (issue 25: the
    process tree's memory): asyncio alone, and the compactor and delete services that
    brought it in, took 4 MB of each worker's own memory (bench/REPORT.md)."""
    modules = _query_worker_modules()
    assert "asyncio" not in modules
    assert not modules & {"services.upkeep.compactor", "services.upkeep.deletes",
                          "services.upkeep.sealer", "services.runtime.base"}


def _count(url: str, now: int) -> httpx.Response:
    return httpx.get(url + "/logstore/api/v1/query", headers={"X-Scope-OrgID": "w"},
                     params={"query": 'sum(count_over_time({env="prod"}[2h]))',
                             "time": str(now)}, timeout=60)


def _split_query(url: str, now: int) -> httpx.Response:
    """A range query of 60 steps: split over both workers, so both are started."""
    return httpx.get(url + "/logstore/api/v1/query_range", headers={"X-Scope-OrgID": "w"},
                     params={"query": 'sum(count_over_time({env="prod"}[1m]))',
                             "start": str(now - HOUR), "end": str(now), "step": "60"},
                     timeout=60)


def _rollup_kb(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if rest.split() and rest.split()[-1] == "kB":
                out[key] = int(rest.split()[0])
    return out


def test_the_workers_share_the_imports_of_the_process_they_are_forked_from(make_server):
    """Issue 25's memory: the workers are forked from one zygote, which imported the
    engine, SQLite and numpy once, so those pages are every worker's at once, where a fresh
    interpreter had 26 MB of them its own (bench/REPORT.md). The zygote ends once the pool
    has its workers."""
    srv = make_server({**BASE, "querier": {**BASE["querier"], "worker_processes": 2}})
    now = time.time_ns()
    _push(srv.url, now)
    assert _split_query(srv.url, now).status_code == 200
    assert _metric(srv.url, "logstore_query_workers_started_total") == 2
    workers = query_worker_pids(group=srv.proc.pid)
    assert len(workers) == 2, workers
    _wait_for(lambda: not zygote_pids(group=srv.proc.pid))
    for pid in workers:
        pages = _rollup_kb(pid)
        # a fresh interpreter's pages shared with anyone are its libraries, never dirty ones
        assert pages["Shared_Dirty"] > 10 * 1024, pages
        assert pages["Private_Dirty"] < pages["Shared_Dirty"], pages


def test_a_worker_that_ended_is_forked_again_by_a_new_zygote(make_server):
    srv = make_server({**BASE, "querier": {**BASE["querier"], "worker_processes": 1}})
    now = time.time_ns()
    _push(srv.url, now)
    r = _count(srv.url, now)
    assert r.status_code == 200 and r.json()["data"]["result"][0]["value"][1] == "1500"
    [worker] = query_worker_pids(group=srv.proc.pid)
    # the pool is full: its zygote has ended, and the worker goes on without it
    _wait_for(lambda: not zygote_pids(group=srv.proc.pid))
    os.kill(worker, signal.SIGKILL)
    _wait_for(lambda: process_ended(worker))
    r = _count(srv.url, now)
    assert r.status_code == 200 and r.json()["data"]["result"][0]["value"][1] == "1500"
    [new_worker] = query_worker_pids(group=srv.proc.pid)
    assert new_worker != worker
    assert _metric(srv.url, "logstore_query_workers_started_total") == 2
    assert _metric(srv.url, "logstore_query_workers_lost_total") == 1
    _wait_for(lambda: not zygote_pids(group=srv.proc.pid))
    # a server killed outright leaves no worker behind: its request pipe closes
    server = server_of(new_worker)
    assert parent_pid(server) == srv.proc.pid  # the server, which `serve` started
    os.kill(server, signal.SIGKILL)
    _wait_for(lambda: process_ended(new_worker))

