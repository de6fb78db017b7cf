"""Index stats, volume and volume_range (spec/http-api.md section 6) over the loghub OpenSSH
set at its own timestamps: every figure equals the ground truth counted here from the lines,
in the head and sealed, and after a delete request hides some of them."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone

import time

import pytest

from tests.conftest import loghub_lines
from tests.helpers import JSON_HEADERS, PUSH, push_body

H = 3600 * 10**9
STATS = "/logstore/api/v1/index/stats"
VOLUME = "/logstore/api/v1/index/volume"
RANGE = "/logstore/api/v1/index/volume_range"


def kind(line: str) -> str:
    return "failure" if "fail" in line.lower() else "other"


def entries() -> list[tuple[int, str, str]]:
    """(ts, kind, line) once each (exact repeats are stored once)."""
    out = set()
    for line in loghub_lines("OpenSSH"):
        dt = datetime.strptime("2023 " + line[:15], "%Y %b %d %H:%M:%S")
        out.add((int(dt.replace(tzinfo=timezone.utc).timestamp()) * 10**9, kind(line), line))
    return sorted(out)


@pytest.fixture(scope="module")
def data():
    rows = entries()
    return rows, rows[0][0], rows[-1][0]


@pytest.fixture
def client(make_client, data):
    rows, _, _ = data
    c = make_client({"limits_config": {"reject_old_samples": False},
                     "compactor": {"retention_enabled": True}})
    by_kind = defaultdict(list)
    for ts, k, line in rows:
        by_kind[k].append([str(ts), line])
    for k, values in by_kind.items():
        for i in range(0, len(values), 500):
            body = push_body({"job": "openssh", "kind": k}, values[i:i + 500])
            assert c.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    return c


def size(line: str) -> int:
    return len(line.encode())


def rng(lo: int, hi: int) -> dict[str, str]:
    return {"start": str(lo), "end": str(hi)}


def check_everything(c, rows, lo, hi):
    stats = c.get(STATS, params={"query": '{job="openssh"}', **rng(lo, hi)})
    assert stats.status_code == 200, stats.text
    got = stats.json()
    assert (got["streams"], got["entries"], got["bytes"]) == (
        len({k for _, k, _ in rows}), len(rows), sum(size(l) for *_, l in rows))
    assert got["chunks"] >= got["streams"]

    by_kind = defaultdict(int)
    for _, k, line in rows:
        by_kind[k] += size(line)
    r = c.get(VOLUME, params={"query": '{job="openssh"}', **rng(lo, hi)}).json()
    assert r["data"] == {"resultType": "vector", "result": [
        {"metric": {"job": "openssh"}, "value": [round(hi / 1e9, 3), str(sum(by_kind.values()))]}]}
    r = c.get(VOLUME, params={"query": '{job="openssh"}', "targetLabels": "kind",
                              **rng(lo, hi)}).json()
    ranked = sorted(by_kind.items(), key=lambda kv: -kv[1])
    assert r["data"]["result"] == [{"metric": {"kind": k}, "value": [round(hi / 1e9, 3), str(v)]}
                                   for k, v in ranked]
    r = c.get(VOLUME, params={"query": '{job="openssh"}', "aggregateBy": "labels",
                              **rng(lo, hi)}).json()
    total = str(sum(by_kind.values()))
    assert [(x["metric"], x["value"][1]) for x in r["data"]["result"]] == [
        ({"job": ""}, total), ({"kind": ""}, total), ({"service_name": ""}, total)]
    r = c.get(VOLUME, params={"query": '{job="openssh"}', "targetLabels": "kind", "limit": "1",
                              **rng(lo, hi)}).json()
    assert [x["metric"] for x in r["data"]["result"]] == [{"kind": ranked[0][0]}]

    # hourly buckets: [h, h + 1h), stamped a millisecond before they end
    hours = defaultdict(int)
    for ts, k, line in rows:
        if k == "failure":
            hours[ts - ts % H] += size(line)
    r = c.get(RANGE, params={"query": '{job="openssh", kind="failure"}', "step": "1h",
                             **rng(lo, hi)}).json()
    assert r["data"]["resultType"] == "matrix"
    (series,) = r["data"]["result"]
    assert series["metric"] == {"job": "openssh", "kind": "failure"}
    want = [[round((h + H - 10**6) / 1e9, 3), str(v)] for h, v in sorted(hours.items())]
    assert series["values"][1:-1] == want[1:-1]
    assert sum(int(v) for _, v in series["values"]) == sum(hours.values())


def test_stats_and_volume_equal_the_ground_truth(client, data):
    rows, lo, hi = data
    check_everything(client, rows, lo, hi)
    assert client.post("/flush").status_code == 204  # sealed: the same answers
    check_everything(client, rows, lo, hi)
    # a narrower range, from a whole minute (counts are of whole minutes, as Loki's are of
    # whole chunks: a range starting inside a minute counts that minute's lines)
    mid = lo + (hi - lo) // 2
    mid -= mid % (60 * 10**9)
    check_everything(client, [r for r in rows if mid <= r[0] <= hi], mid, hi)
    inside = next(r[0] for r in rows if r[0] > mid + 10**9 and (r[0] - mid) % (60 * 10**9))
    got = client.get(STATS, params={"query": '{job="openssh"}', **rng(inside, hi)}).json()
    minute = inside - inside % (60 * 10**9)
    assert got["entries"] == sum(1 for r in rows if minute <= r[0] <= hi)


def test_deleted_lines_leave_stats_and_volume_at_once(client, data):
    rows, lo, hi = data
    deletions = client.app.state.services.deletions
    deletions.clock = lambda: hi + 48 * H
    r = client.post("/logstore/api/v1/delete", params={
        "query": '{job="openssh"} |= "Failed password for root"',
        "start": str(lo // 10**9), "end": str(hi // 10**9 + 1)})
    assert r.status_code == 204
    kept = [row for row in rows if "Failed password for root" not in row[2]]
    assert len(kept) < len(rows)
    check_everything(client, kept, lo, hi)


@pytest.mark.parametrize("path, params, status, text", [
    (VOLUME, {"query": '{job="openssh"} |= "x"'}, 400, "only label matchers are supported"),
    (STATS, {"query": '{job="openssh"} | json'}, 400, "only label matchers are supported"),
    (VOLUME, {"query": '{job="openssh"}', "limit": "-1"}, 400, "limit must be a positive value"),
    (VOLUME, {"query": '{job="openssh"}', "aggregateBy": "streams"}, 400,
     "invalid aggregation option"),
    (RANGE, {"query": '{job="openssh"}', "step": "0"}, 400,
     "zero or negative query resolution step widths are not accepted. Try a positive integer"),
])
def test_errors(client, data, path, params, status, text):
    _, lo, hi = data
    r = client.get(path, params={**params, **rng(lo, hi)})
    assert (r.status_code, r.text) == (status, text)


def test_max_series_and_disabled(make_client, tmp_path):
    c = make_client({"limits_config": {"volume_max_series": 1}})
    now = time.time_ns()
    for app in ("a", "b"):
        r = c.post(PUSH, content=push_body({"app": app}, [[str(now), "x"]]),
                   headers=JSON_HEADERS)
        assert r.status_code == 204
    r = c.get(VOLUME, params={"query": '{app=~".+"}', **rng(now - H, now + H)})
    assert (r.status_code, r.text) == (
        400, "the query hit the max number of series limit (limit: 1 series)")
    off = make_client({"limits_config": {"volume_enabled": False}}, data_dir=tmp_path / "off")
    assert off.get(VOLUME, params={"query": '{app="a"}'}).status_code == 404


def test_empty(client):
    r = client.get(STATS, params={"query": '{job="nope"}'})
    assert r.json() == {"streams": 0, "chunks": 0, "bytes": 0, "entries": 0}
    r = client.get(VOLUME, params={"query": '{job="nope"}'})
    assert r.json()["data"] == {"resultType": "vector", "result": []}
