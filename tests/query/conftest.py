"""Fixtures for the log-query tests: one app per module loaded with real loghub logs at their
own timestamps (plus JSON and logfmt renderings of the HDFS ground truth), and helpers to
query it."""

from __future__ import annotations

import csv
import json
import calendar
import time
from dataclasses import dataclass, field

import pytest
from litestar.testing import TestClient

from tests.conftest import loghub_file, matrix_client
from tests.helpers import JSON_HEADERS, PUSH


QUERY_RANGE = "/logstore/api/v1/query_range"
QUERY = "/logstore/api/v1/query"
OLD_DATA = {"limits_config": {"reject_old_samples": False}}


def _epoch(fmt: str, text: str) -> int:
    return calendar.timegm(time.strptime(text, fmt))


# LineId is added as nanoseconds: lines sharing a second keep their file order and stay
# distinct entries (identical stream, timestamp and line would be stored once).
TIMESTAMPS = {
    "OpenSSH": lambda r: _epoch("%Y %b %d %H:%M:%S", f"2016 {r['Date']} {r['Day']} {r['Time']}"),
    "Apache": lambda r: _epoch("%a %b %d %H:%M:%S %Y", r["Time"]),
    "HDFS": lambda r: _epoch("%y%m%d %H%M%S", f"{r['Date']} {r['Time']}"),
}


@dataclass
class System:
    name: str
    lines: list[str]
    rows: list[dict]          # the structured CSV, row i describes lines[i]
    ts: list[int]             # ns

    @property
    def start(self) -> int:
        return min(self.ts)

    @property
    def end(self) -> int:
        return max(self.ts) + 1


@dataclass
class Loaded:
    client: TestClient
    systems: dict[str, System] = field(default_factory=dict)

    def range_query(self, query: str, system: str, **params) -> dict:
        s = self.systems[system]
        params = {"query": query, "start": str(s.start), "end": str(s.end), "limit": "5000",
                  **params}
        r = self.client.get(QUERY_RANGE, params=params)
        assert r.status_code == 200, r.text
        return r.json()


def read_system(name: str) -> System:
    log = loghub_file(name)
    structured = loghub_file(name, ".log_structured.csv")
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    with open(structured, encoding="utf-8", errors="replace", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(lines) == len(rows)
    to_seconds = TIMESTAMPS[name]
    ts = [to_seconds(r) * 10**9 + int(r["LineId"]) for r in rows]
    return System(name, lines, rows, ts)


def push(client: TestClient, labels: dict, values: list) -> None:
    body = json.dumps({"streams": [{"stream": labels, "values": values}]})
    r = client.post(PUSH, content=body, headers=JSON_HEADERS)
    assert r.status_code == 204, r.text


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, storage_state) -> Loaded:
    data_dir = tmp_path_factory.mktemp("query") / "data"
    with matrix_client(data_dir, OLD_DATA, storage_state) as client:
        out = Loaded(client)
        for name in TIMESTAMPS:
            s = read_system(name)
            out.systems[name] = s
            push(client, {"job": name.lower()},
                 [[str(t), line] for t, line in zip(s.ts, s.lines)])
        hdfs = out.systems["HDFS"]
        # the same HDFS events rendered as JSON and as logfmt, from the ground-truth columns
        push(client, {"job": "hdfs-json"}, [
            [str(t), json.dumps({"level": r["Level"], "pid": int(r["Pid"]),
                                 "component": r["Component"], "event": {"id": r["EventId"]},
                                 "content": r["Content"]})]
            for t, r in zip(hdfs.ts, hdfs.rows)])
        push(client, {"job": "hdfs-logfmt"}, [
            [str(t), f'level={r["Level"]} pid={r["Pid"]} event={r["EventId"]} '
                     f'msg={json.dumps(r["Content"])}']
            for t, r in zip(hdfs.ts, hdfs.rows)])
        yield out


def entries(body: dict) -> list[tuple[dict, int, str]]:
    """(labels, ts, line) of every entry of a streams answer, in answer order."""
    out = []
    for stream in body["data"]["result"]:
        for ts, line in stream["values"]:
            out.append((stream["stream"], int(ts), line))
    return out
