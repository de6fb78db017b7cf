"""Metric queries over real loghub logs at their own timestamps. Expected values come from a
plain loop over the CSV ground truth and the raw lines in this file, never from the engine."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from tests.conftest import matrix_client
from tests.helpers import JSON_HEADERS, PUSH
from tests.query.conftest import OLD_DATA, read_system

QUERY_RANGE = "/logstore/api/v1/query_range"
QUERY = "/logstore/api/v1/query"
NS = 10**9


@pytest.fixture(scope="module")
def logs(tmp_path_factory, storage_state):
    data_dir = tmp_path_factory.mktemp("loghub-metrics") / "data"
    systems = {name: read_system(name) for name in ("OpenSSH", "Apache")}
    with matrix_client(data_dir, OLD_DATA, storage_state) as client:
        for name, s in systems.items():
            body = {"streams": [{"stream": {"job": name.lower()},
                                 "values": [[str(t), line] for t, line in zip(s.ts, s.lines)]}]}
            r = client.post(PUSH, content=json.dumps(body), headers=JSON_HEADERS)
            assert r.status_code == 204, r.text
        yield client, systems


def steps(start: int, end: int, step: int) -> list[int]:
    """Loki's frontend aligns range queries: start down, end up to a multiple of step."""
    first = start // step * step
    last = -(-end // step) * step
    return list(range(first, last + 1, step))


def reference(samples: list[tuple[int, float]], start: int, end: int, step: int, rng: int,
              agg) -> list[list]:
    """[[seconds, value], ...] for every step whose window (t - rng, t] holds a sample."""
    out = []
    for t in steps(start, end, step):
        window = [v for ts, v in samples if t - rng < ts <= t]
        if window:
            out.append([t // NS, agg(window)])
    return out


def matrix(client, query: str, start: int, end: int, step: str) -> dict[str, list]:
    r = client.get(QUERY_RANGE, params={"query": query, "start": str(start),
                                        "end": str(end), "step": step})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert data["resultType"] == "matrix"
    return {json.dumps(series["metric"], sort_keys=True):
            [[ts, float(v)] for ts, v in series["values"]] for series in data["result"]}


def test_count_of_failed_passwords_per_10m(logs):
    client, systems = logs
    ssh = systems["OpenSSH"]
    samples = [(ts, 1.0) for ts, line in zip(ssh.ts, ssh.lines) if "Failed password" in line]
    got = matrix(client, 'sum(count_over_time({job="openssh"} |= "Failed password" [10m]))',
                 ssh.start, ssh.end, "10m")
    want = reference(samples, ssh.start, ssh.end, 600 * NS, 600 * NS, len)
    assert got == {"{}": want}
    assert sum(v for _, v in want) > 0


def test_apache_lines_per_level_per_hour(logs):
    client, systems = logs
    apache = systems["Apache"]
    by_level: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for ts, row in zip(apache.ts, apache.rows):
        by_level[row["Level"]].append((ts, 1.0))
    query = (r'sum by (level) (count_over_time({job="apache"} '
             r'| regexp "^\\[[^\\]]+\\] \\[(?P<level>\\w+)\\]" [1h]))')
    got = matrix(client, query, apache.start, apache.end, "1h")
    want = {json.dumps({"level": level}): reference(samples, apache.start, apache.end,
                                                    3600 * NS, 3600 * NS, len)
            for level, samples in by_level.items()}
    assert got == want
    assert set(by_level) == {"error", "notice"}


def test_unfiltered_rate_and_bytes_come_out_exact(logs):
    """Served from the per-minute rollups (no line is read): still exactly the reference."""
    client, systems = logs
    ssh = systems["OpenSSH"]
    rate = matrix(client, 'sum(rate({job="openssh"}[5m]))', ssh.start, ssh.end, "5m")
    want = reference([(ts, 1.0) for ts in ssh.ts], ssh.start, ssh.end, 300 * NS, 300 * NS,
                     lambda w: len(w) / 300)
    assert rate.keys() == {"{}"}
    assert [ts for ts, _ in rate["{}"]] == [ts for ts, _ in want]
    assert [v for _, v in rate["{}"]] == pytest.approx([v for _, v in want], rel=1e-12)

    size = matrix(client, 'sum(bytes_over_time({job="openssh"}[1h]))', ssh.start, ssh.end,
                  "1h")
    want = reference([(ts, float(len(line.encode()))) for ts, line in zip(ssh.ts, ssh.lines)],
                     ssh.start, ssh.end, 3600 * NS, 3600 * NS, sum)
    assert size == {"{}": want}


def test_instant_counts_of_the_commonest_templates(logs):
    client, systems = logs
    ssh = systems["OpenSSH"]
    counts: dict[str, int] = defaultdict(int)
    for row in ssh.rows:
        counts[row["EventId"]] += 1
    # label each line with its event by the Pid-independent template text of the top events
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    templates = {row["EventId"]: row["EventTemplate"] for row in ssh.rows}
    for event, n in top:
        needle = templates[event].split("<*>")[0].strip()
        want = sum(1 for line in ssh.lines if needle in line)
        r = client.get(QUERY, params={
            "query": f'sum(count_over_time({{job="openssh"}} |= {json.dumps(needle)} [30d]))',
            "time": str(ssh.end)})
        assert r.status_code == 200, r.text
        result = r.json()["data"]["result"]
        assert [float(s["value"][1]) for s in result] == [float(want)]
        assert want >= n  # the template's own lines contain its leading text
