"""Reads that start from matchers cost O(matched streams): the work SQLite does for a broad
selector over 4x the streams is about 4x, not 16x (issue 22).

Work is counted, not timed: every reader connection counts the virtual-machine steps of
every statement it runs (SQLite's progress handler called on each step, wrapped around the
deadline handler the reader installs itself), so the figure is the same on any machine.
Each read runs against N and 4N streams of the same shape, with the lines in the head and
again with every line sealed into blocks.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest

from tests.helpers import HEAD_ROWS, JSON_HEADERS, PUSH, SEALED_BLOCKS

TENANT = "growth"
HEADERS = {"X-Scope-OrgID": TENANT}
SMALL, LARGE = 300, 1200
# 4x the streams may cost a little more than 4x the work (larger B-trees are deeper, JSON
# texts longer); a read that visits every stream once per stream costs 16x
MAX_GROWTH = 5.0
NS = 10**9


class _Steps:
    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def add(self) -> None:
        with self.lock:
            self.count += 1


STEPS = _Steps()


class CountingConnection(sqlite3.Connection):
    """A connection whose every VM step is counted; a progress handler installed on it
    (the reader's deadline check) still runs every N steps as asked."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        super().set_progress_handler(self._count, 1)

    def _count(self) -> int:
        STEPS.add()
        return 0

    def set_progress_handler(self, handler, n):  # noqa: D102 - sqlite3 API
        if handler is None:
            super().set_progress_handler(self._count, 1)
            return
        left = [n]

        def counted() -> int:
            STEPS.add()
            left[0] -= 1
            if left[0] <= 0:
                left[0] = n
                return handler()
            return 0
        super().set_progress_handler(counted, 1)


def _read_connections(monkeypatch) -> None:
    """Reader connections (query_only) are counting ones; the writer is left alone."""
    from storage import db as storage_db

    real = storage_db.sqlite3.connect

    def connect(path, *args, **kwargs):
        kwargs.setdefault("factory", CountingConnection)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(storage_db.sqlite3, "connect", connect)


def _push_streams(client, n: int, now: int) -> None:
    for first in range(0, n, 500):
        streams = []
        for i in range(first, min(n, first + 500)):
            values = [[str(now - (40 - k) * 60 * NS + i), f"level=info app=a{i % 20} pod={i} "
                       f"status={200 + k} msg=\"served {k}\""] for k in range(2)]
            streams.append({"stream": {"env": "prod", "app": f"a{i % 20}", "pod": f"pod-{i}"},
                            "values": values})
        r = client.post(PUSH, content=json.dumps({"streams": streams}),
                        headers={**JSON_HEADERS, **HEADERS})
        assert r.status_code == 204, r.text


def _reads(now: int) -> list[tuple[str, str, dict]]:
    hour = {"start": str(now - 3600 * NS), "end": str(now + NS)}
    v1 = "/logstore/api/v1"
    return [
        ("series", f"{v1}/series", {"match[]": '{env="prod"}', **hour}),
        ("labels", f"{v1}/labels", hour),
        ("label values", f"{v1}/label/pod/values", hour),
        ("label values with a selector", f"{v1}/label/pod/values",
         {"query": '{env="prod"}', **hour}),
        ("log query, filter", f"{v1}/query_range",
         {"query": '{env="prod"} |= "pod=7 "', "limit": "100", **hour}),
        ("log query, selector", f"{v1}/query_range",
         {"query": '{env="prod"}', "limit": "100", **hour}),
        ("metric query from rollups", f"{v1}/query_range",
         {"query": 'sum by (app) (count_over_time({env="prod"}[5m]))', "step": "60", **hour}),
        ("metric query that scans", f"{v1}/query_range",
         {"query": 'sum by (app) (count_over_time({env="prod"} |= "level=info" [5m]))',
          "step": "60", **hour}),
        ("instant metric query", f"{v1}/query",
         {"query": 'sum by (app) (rate({env="prod"}[1h]))', "time": hour["end"]}),
        ("index/stats", f"{v1}/index/stats", {"query": '{env="prod"}', **hour}),
        ("index/volume", f"{v1}/index/volume",
         {"query": '{env="prod"}', "targetLabels": "app", **hour}),
        ("index/volume_range", f"{v1}/index/volume_range",
         {"query": '{env="prod"}', "step": "300", **hour}),
        ("detected_labels", f"{v1}/detected_labels", {"query": '{env="prod"}', **hour}),
        ("detected_fields", f"{v1}/detected_fields", {"query": '{env="prod"}', **hour}),
        ("multi-tenant series", f"{v1}/series",
         {"match[]": '{env="prod"}', **hour, "_tenant": f"{TENANT}|nobody"}),
    ]


CONFIG = {"auth_enabled": True,
          "storage": {"sealing_enabled": False},
          # the work is counted on the server's own reader connections
          "querier": {"multi_tenant_queries_enabled": True, "worker_processes": 0},
          "limits_config": {"max_query_series": 100_000}}


def _work(make_client, tmp_path, monkeypatch, n: int, sealed: bool) -> dict[str, int]:
    """SQLite steps of each read over n streams (and, as a check that the reads reach the
    data, how many streams the series answer names)."""
    _read_connections(monkeypatch)
    client = make_client(CONFIG, data_dir=tmp_path / f"data-{n}-{sealed}")
    now = time.time_ns()
    _push_streams(client, n, now)
    if sealed:
        assert client.post("/flush").status_code == 204
    db = sqlite3.connect(tmp_path / f"data-{n}-{sealed}" / "logstore.db")
    head, blocks = db.execute(f"SELECT {HEAD_ROWS}, {SEALED_BLOCKS}").fetchone()
    db.close()
    # the state the test names: all in the head, or all sealed
    assert (head, blocks > 0) == ((0, True) if sealed else (2 * n, False))
    out: dict[str, int] = {}
    for name, path, params in _reads(now):
        params = dict(params)
        tenant = params.pop("_tenant", TENANT)
        before = STEPS.count
        r = client.get(path, params=params, headers={"X-Scope-OrgID": tenant})
        assert r.status_code == 200, (name, r.text)
        out[name] = STEPS.count - before
        if name == "series":
            assert len(r.json()["data"]) == n
    return out


@pytest.mark.parametrize("sealed", [False, True], ids=["head", "sealed"])
def test_work_grows_with_the_streams_not_faster(make_client, tmp_path, monkeypatch, sealed):
    small = _work(make_client, tmp_path, monkeypatch, SMALL, sealed)
    large = _work(make_client, tmp_path, monkeypatch, LARGE, sealed)
    growth = {name: large[name] / max(small[name], 1) for name in small}
    # the counter sees every read's work (label names cost a probe per name, the rest
    # reads each matched stream at least once)
    assert all(small[name] > (0 if name == "labels" else SMALL) for name in small), small
    too_fast = {name: round(g, 1) for name, g in growth.items() if g > MAX_GROWTH}
    assert not too_fast, f"work grew more than {MAX_GROWTH}x for 4x the streams: {too_fast}"
