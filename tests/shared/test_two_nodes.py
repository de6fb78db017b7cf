"""Two logstore nodes sharing their state in one PostgreSQL database (storage.shared.url),
each a real `logstore serve` process: what one node writes, the other reads; the rules are
evaluated by one node only, and by the other once the first stops.

Each node keeps its log data in ClickHouse's embedded engine (chdb) in a directory of its
own: chdb cannot share a directory between processes. A real cluster points every node at
one ClickHouse server (`storage.clickhouse.url: http://...`); here the log data of the two
nodes is apart, and the test pushes the lines it reads to the node it reads them from."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import httpx
import psycopg
import pytest
import yaml

from tests.conftest import LogstoreServer
from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body, until

RULES = "/logstore/api/v1/rules"
DELETE = "/logstore/api/v1/delete"
ADMIN = ("admin", "s3cret")
GROUP = """\
name: always
interval: 1s
rules:
  - alert: Always
    expr: vector(1)
  - alert: Slow
    expr: vector(1)
    for: 1h
  - alert: Paid
    expr: sum(count_over_time({app="paid"}[1h])) > 0
"""


def _node(tmp_path: Path, name: str, shared: str, alertmanager: str) -> LogstoreServer:
    (tmp_path / name).mkdir()
    return LogstoreServer(tmp_path / name / "data", {
        "storage": {"backend": "clickhouse",
                    "clickhouse": {"url": f"chdb://{tmp_path / name / 'ch'}"},
                    "shared": {"url": shared}},
        "grafana": {"admin_password": ADMIN[1]},
        "compactor": {"retention_enabled": True},
        "limits_config": {"reject_old_samples": False},
        # each node names itself in what it sends, so Alertmanager tells who sent an alert
        "ruler": {"alertmanager_url": alertmanager, "resend_delay": "1s",
                  "external_labels": {"node": name}}})




def _iterations(node: LogstoreServer) -> int | None:
    """The node's evaluations of the group (None: the node does not know the group)."""
    text = httpx.get(node.url + "/metrics", timeout=10).text
    m = re.search(r'^logstore_ruler_group_iterations_total\{[^}]*rule_group="team;always"'
                  r'[^}]*\} (\S+)$', text, re.M)
    return int(float(m.group(1))) if m else None


def _leases_held(node: LogstoreServer) -> dict[str, int]:
    """The node's own view of the leases it holds (/metrics, logstore_lease_held)."""
    text = httpx.get(node.url + "/metrics", timeout=10).text
    return {m.group(1): int(float(m.group(2))) for m in re.finditer(
        r'^logstore_lease_held\{lease="([^"]+)"\} (\S+)$', text, re.M)}


def _holders(url: str) -> dict[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return dict(conn.execute("SELECT name, holder FROM leases"))


def _held_by(url: str, node: LogstoreServer) -> bool:
    """Whether the ruler lease's holder (host:pid:random) is this node's server process, the
    process the test started or one of its children."""
    holder = _holders(url).get("ruler", "")
    host, _, rest = holder.partition(":")
    if host != socket.gethostname():
        return False
    pid = int(rest.split(":")[0])
    while pid > 1:
        if pid == node.proc.pid:
            return True
        status = Path(f"/proc/{pid}/status").read_text()
        pid = int(re.search(r"^PPid:\s*(\d+)", status, re.M).group(1))
    return False


def _senders(alertmanager: str, alertname: str) -> set[str]:
    alerts = httpx.get(alertmanager + "/api/v2/alerts", params={"active": "true"},
                       timeout=5).json()
    return {a["labels"].get("node") for a in alerts if a["labels"]["alertname"] == alertname}


def _values(node: LogstoreServer, alertname: str) -> list[str]:
    alerts = httpx.get(node.url + "/compat/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return [a["value"] for a in alerts if a["labels"]["alertname"] == alertname]


def _slow_alert(node: LogstoreServer) -> list[dict]:
    alerts = httpx.get(node.url + "/compat/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == "Slow"]


def _lines(node: LogstoreServer, start: int, end: int) -> list[str]:
    r = httpx.get(node.url + "/logstore/api/v1/query_range", params={
        "query": '{app="billing"}', "start": str(start), "end": str(end),
        "direction": "forward"}, timeout=30)
    assert r.status_code == 200, r.text
    return [line for s in r.json()["data"]["result"] for _, line in s["values"]]


def test_two_nodes_share_state_and_run_the_rules_once(tmp_path, postgres_url, alertmanager):
    a = _node(tmp_path, "a", postgres_url, alertmanager.url).start(timeout=60)
    b = None
    try:
        # a takes the ruler's lease first: it is the only node when its ruler starts
        until(lambda: _holders(postgres_url).get("ruler"), "a holds the ruler lease")
        b = _node(tmp_path, "b", postgres_url, alertmanager.url).start(timeout=60)

        # the states the test needs: one database for both, a chdb directory each, and the
        # lease held by a's process
        configs = [yaml.safe_load(n.config_path.read_text())["storage"] for n in (a, b)]
        assert configs[0]["shared"] == configs[1]["shared"] == {"url": postgres_url}
        assert {c["clickhouse"]["url"] for c in configs} == {
            f"chdb://{tmp_path / 'a' / 'ch'}", f"chdb://{tmp_path / 'b' / 'ch'}"}
        assert all(any((tmp_path / n / "ch").iterdir()) for n in "ab")
        assert _held_by(postgres_url, a)

        # (a) a dashboard saved on a is read on b
        r = httpx.post(a.url + "/api/dashboards/db", auth=ADMIN, timeout=10, json={
            "dashboard": {"uid": "shared-1", "title": "Shared", "tags": ["cluster"]}})
        assert r.status_code == 200, r.text
        r = httpx.get(b.url + "/api/dashboards/uid/shared-1", auth=ADMIN, timeout=10)
        assert r.status_code == 200, r.text
        assert {k: r.json()["dashboard"][k] for k in ("uid", "title", "tags")} == {
            "uid": "shared-1", "title": "Shared", "tags": ["cluster"]}

        # (b) a group created on b is listed on a, and evaluated by a alone
        r = httpx.post(f"{b.url}{RULES}/team", content=GROUP, timeout=10)
        assert r.status_code == 202, r.text
        r = httpx.get(f"{a.url}{RULES}/team/always", timeout=10)
        assert (r.status_code, yaml.safe_load(r.text)) == (200, yaml.safe_load(GROUP))
        until(lambda: _iterations(a), "a evaluates the group it read from the shared state")
        until(lambda: _senders(alertmanager.url, "Always"), "the alert reaches Alertmanager")
        until(lambda: _iterations(b) is not None, "b's ruler knows the group")
        seen = _iterations(a)
        until(lambda: _iterations(a) >= seen + 3, "a evaluates on")
        assert _iterations(b) == 0
        assert _senders(alertmanager.url, "Always") == {"a"}
        assert _leases_held(a)["ruler"] == 1 and _leases_held(b)["ruler"] == 0
        (pending,) = _slow_alert(a)
        assert pending["state"] == "pending"
        # b, following, shows the alerts as a stored them, and again once they changed: it
        # reads a group's states again when their version moved (storage/rules.py
        # `group_versions`)
        until(lambda: [(x["state"], x["activeAt"]) for x in _slow_alert(b)]
              == [("pending", pending["activeAt"])], "b reads the alert states a wrote")
        for lines in (1, 2):
            r = httpx.post(a.url + PUSH, headers=JSON_HEADERS, timeout=30, content=push_body(
                {"app": "paid"}, [[str(now_ns() - 10**9), f"paid {lines}"]]))
            assert r.status_code == 204, r.text
            until(lambda: _values(a, "Paid") == [f"{lines}e+00"], f"a counts {lines} lines")
            until(lambda: _values(b, "Paid") == [f"{lines}e+00"], f"b reads {lines} lines")

        # (d) a delete request made on a is listed by b, and hides b's lines there
        t = now_ns() - 60 * 10**9
        r = httpx.post(b.url + PUSH, headers=JSON_HEADERS, timeout=30, content=push_body(
            {"app": "billing"}, [[str(t), "paid"], [str(t + 1), "token=abc"]]))
        assert r.status_code == 204, r.text
        assert _lines(b, t, t + 10**9) == ["paid", "token=abc"]
        r = httpx.post(a.url + DELETE, timeout=10, params={
            "query": '{app="billing"} |= "token"', "start": str(t // 10**9),
            "end": str(t // 10**9 + 1)})
        assert r.status_code == 204, r.text
        listed = httpx.get(b.url + DELETE, timeout=10).json()
        assert [(d["query"], d["status"]) for d in listed] == [
            ('{app="billing"} |= "token"', "received")]
        until(lambda: _lines(b, t, t + 10**9) == ["paid"], "b hides the deleted line")

        # (c) a stops (releasing its leases): b takes the rules over, and keeps the timer
        # of the pending alert that a started
        a.stop()
        assert a.proc.returncode == 0, a.log_path.read_text()[-2000:]
        until(lambda: _held_by(postgres_url, b), "b holds the ruler lease")
        until(lambda: _iterations(b), "b evaluates the group")
        until(lambda: "b" in _senders(alertmanager.url, "Always"), "b's alert arrives")
        assert _leases_held(b)["ruler"] == 1
        (kept,) = _slow_alert(b)
        assert (kept["state"], kept["activeAt"]) == ("pending", pending["activeAt"])
    finally:
        for node in (a, b):
            if node is not None:
                node.stop()
