"""Alerting rules as Prometheus runs them: pending -> firing -> resolved, `for` and
`keep_firing_for`, templates, a failing rule beside working ones, the `for:` timer kept across
a restart, and delivery: an in-process receiver for failures and slowness, the real
Alertmanager end to end. Evaluation times are injected (`Ruler.evaluate(run, ts)`)."""

from __future__ import annotations

import json
import time
from typing import Callable

import httpx
import pytest

from tests.helpers import JSON_HEADERS, PUSH, push_body

RULES = "/logstore/api/v1/rules"
S = 10**9
T0 = (time.time_ns() // (60 * S)) * 60 * S  # a whole minute, so windows are easy to read
CHECKOUT = """\
name: checkout
interval: 1m
rules:
  - alert: CheckoutErrors
    expr: sum by (job) (count_over_time({job="checkout"} |= "error" [1m])) > 5
    for: 2m
    labels:
      severity: page
      team: '{{ $labels.job | toUpper }}'
    annotations:
      summary: '{{ $labels.job }} logged {{ $value }} errors in a minute'
      ratio: '{{ humanizePercentage 0.25 }} {{ humanizeDuration 3725 }} {{ 1234567 | humanize }}'
"""


def push_errors(client, at: int, n: int, job: str = "checkout") -> None:
    values = [[str(at + i * 10**6), f"error {i} payment failed"] for i in range(n)]
    r = client.post(PUSH, content=push_body({"job": job}, values), headers=JSON_HEADERS)
    assert r.status_code == 204


def setup_group(client, body: str = CHECKOUT, namespace: str = "shop"):
    ruler = paused(client)
    r = client.post(f"{RULES}/{namespace}", content=body)
    assert r.status_code == 202, r.text
    return ruler, next(r for k, r in ruler.runs.items() if k[1] == namespace)


def paused(client):
    """The client's ruler, evaluating only when the test says so."""
    ruler = client.app.state.services.ruler
    client.blocking_portal.call(ruler.pause)
    return ruler


def evaluate(client, ruler, run, ts: int) -> None:
    client.blocking_portal.call(ruler.evaluate, run, ts)


def alerts(client) -> list[dict]:
    return client.get("/compat/api/v1/alerts").json()["data"]["alerts"]


@pytest.fixture
def client(make_client):
    return make_client({"limits_config": {"reject_old_samples": False}})


def test_pending_firing_resolved(client):
    ruler, run = setup_group(client)
    evaluate(client, ruler, run, T0)
    assert alerts(client) == []
    rules = client.get("/compat/api/v1/rules").json()["data"]["groups"][0]["rules"]
    assert (rules[0]["state"], rules[0]["health"]) == ("inactive", "ok")

    push_errors(client, T0 + 10 * S, 7)
    evaluate(client, ruler, run, T0 + 60 * S)
    pending = {"labels": {"alertname": "CheckoutErrors", "job": "checkout",
                          "severity": "page", "team": "CHECKOUT"},
               "annotations": {"ratio": "25% 1h 2m 5s 1.235M",
                               "summary": "checkout logged 7 errors in a minute"},
               "state": "pending", "activeAt": _rfc(T0 + 60 * S), "value": "7e+00"}
    assert alerts(client) == [pending]

    push_errors(client, T0 + 70 * S, 9)
    evaluate(client, ruler, run, T0 + 120 * S)  # 1m after activeAt: still pending
    assert [a["state"] for a in alerts(client)] == ["pending"]
    push_errors(client, T0 + 130 * S, 6)
    evaluate(client, ruler, run, T0 + 180 * S)  # 2m: firing
    (firing,) = alerts(client)
    assert (firing["state"], firing["activeAt"], firing["value"]) == (
        "firing", _rfc(T0 + 60 * S), "6e+00")
    group = client.get("/compat/api/v1/rules").json()["data"]["groups"][0]
    assert group["rules"][0]["state"] == "firing"
    assert group["lastEvaluation"] == _rfc(T0 + 180 * S)

    evaluate(client, ruler, run, T0 + 240 * S)  # no errors in the last minute: resolved
    assert alerts(client) == []
    rule = ruler.runs[("fake", "shop", "checkout")].rules[0]
    (resolved,) = rule.alerts.values()
    assert (resolved.state, resolved.resolved_at) == ("inactive", T0 + 240 * S)
    evaluate(client, ruler, run, T0 + 240 * S + 16 * 60 * S)  # kept 15 minutes, then gone
    assert rule.alerts == {}


def test_a_blip_shorter_than_for_never_fires(client):
    ruler, run = setup_group(client)
    push_errors(client, T0 + 10 * S, 7)
    evaluate(client, ruler, run, T0 + 60 * S)
    evaluate(client, ruler, run, T0 + 120 * S)
    assert alerts(client) == []  # pending alerts that vanish are dropped, not resolved
    assert ruler.runs[("fake", "shop", "checkout")].rules[0].alerts == {}


def test_keep_firing_for(client):
    body = CHECKOUT.replace("    for: 2m\n", "    keep_firing_for: 3m\n")
    ruler, run = setup_group(client, body)
    push_errors(client, T0 + 10 * S, 7)
    evaluate(client, ruler, run, T0 + 60 * S)
    assert [a["state"] for a in alerts(client)] == ["firing"]  # for: 0 fires at once
    for minute in (2, 3, 4):  # no errors: still firing for 3 minutes
        evaluate(client, ruler, run, T0 + minute * 60 * S)
        assert [a["state"] for a in alerts(client)] == ["firing"], minute
    evaluate(client, ruler, run, T0 + 5 * 60 * S)
    assert alerts(client) == []


def test_a_failing_rule_does_not_stop_the_others(client):
    body = ("name: g\nrules:\n"
            "  - alert: Broken\n    expr: sum(count_over_time({job=\"checkout\"} | json "
            "[1m])) > 0\n"
            "  - alert: Works\n    expr: sum(count_over_time({job=\"checkout\"}[1m])) > 0\n")
    ruler, run = setup_group(client, body)
    push_errors(client, T0 + 10 * S, 3)
    evaluate(client, ruler, run, T0 + 60 * S)
    broken, works = client.get("/compat/api/v1/rules").json()["data"]["groups"][0]["rules"]
    assert (broken["health"], broken["state"]) == ("err", "inactive")
    assert broken["lastError"].startswith("pipeline error: 'JSONParserErr' for series:")
    assert (works["health"], works["state"], works["lastError"]) == ("ok", "firing", "")
    metrics = client.get("/metrics").text
    assert "logstore_ruler_evaluation_failures_total 1.0" in metrics


def test_duplicate_label_sets_are_an_error(client):
    body = ("name: g\nrules:\n  - alert: Dup\n    expr: sum by (job) "
            "(count_over_time({job=~\".+\"}[1m])) > 0\n    labels:\n      job: same\n")
    ruler, run = setup_group(client, body)
    push_errors(client, T0 + 10 * S, 1, "a")
    push_errors(client, T0 + 10 * S, 1, "b")
    evaluate(client, ruler, run, T0 + 60 * S)
    (rule,) = client.get("/compat/api/v1/rules").json()["data"]["groups"][0]["rules"]
    assert (rule["health"], rule["lastError"]) == (
        "err", "vector contains metrics with the same labelset after applying alert labels")


def test_the_for_timer_survives_a_restart(make_client, tmp_path):
    data = tmp_path / "data"
    config = {"limits_config": {"reject_old_samples": False}}
    c = make_client(config, data_dir=data)
    ruler, run = setup_group(c)
    push_errors(c, T0 + 10 * S, 7)
    evaluate(c, ruler, run, T0 + 60 * S)  # pending since T0+60s
    c.__exit__(None, None, None)

    c = make_client(config, data_dir=data)
    ruler = paused(c)
    run = ruler.runs[("fake", "shop", "checkout")]
    assert [(a["state"], a["activeAt"]) for a in alerts(c)] == [("pending", _rfc(T0 + 60 * S))]
    push_errors(c, T0 + 150 * S, 8)
    evaluate(c, ruler, run, T0 + 180 * S)  # 2m after the first activeAt: firing
    assert [(a["state"], a["activeAt"]) for a in alerts(c)] == [("firing", _rfc(T0 + 60 * S))]


PODS = """\
name: pods
interval: 1m
rules:
  - alert: PodErrors
    expr: sum by (pod) (count_over_time({job="k"} |= "error" [5m])) > 0
    annotations:
      summary: '{{ $labels.pod }} logged {{ $value }} errors'
"""


def push_pod_errors(client, at: int, pods: list[str]) -> None:
    streams = [{"stream": {"job": "k", "pod": pod}, "values": [[str(at), "error"]]}
               for pod in pods]
    r = client.post(PUSH, content=json.dumps({"streams": streams}), headers=JSON_HEADERS)
    assert r.status_code == 204


def alert_state_writes(client) -> Callable[[], int]:
    """Rows of alert_states written (inserted, updated or deleted) since the last call,
    counted by temporary triggers on the writer's connection."""
    db = client.app.state.services.db

    def install(conn) -> None:
        conn.execute("CREATE TEMP TABLE state_writes (n INTEGER)")
        for op in ("INSERT", "UPDATE", "DELETE"):
            conn.execute(f"CREATE TEMP TRIGGER state_{op.lower()} AFTER {op} ON "
                         "main.alert_states BEGIN INSERT INTO state_writes VALUES (1); END")

    def taken(conn) -> int:
        n = conn.execute("SELECT count(*) FROM temp.state_writes").fetchone()[0]
        conn.execute("DELETE FROM temp.state_writes")
        return n

    db.write_sync(install)
    return lambda: db.write_sync(taken)


def test_an_evaluation_writes_only_the_alerts_it_changed(make_client, tmp_path):
    """Issue 22: 60 pods firing are not 60 rows every evaluation; a restart still finds
    every alert as it was."""
    t0 = T0 - 3600 * S  # the last push, 18 minutes on, still in the past
    data = tmp_path / "data"
    config = {"limits_config": {"reject_old_samples": False},
              "ruler": {"resend_delay": "1h"}}  # no resend: last_sent_at stays
    c = make_client(config, data_dir=data)
    ruler, run = setup_group(c, PODS, "k8s")
    writes = alert_state_writes(c)
    pods = [f"p{i}" for i in range(60)]
    push_pod_errors(c, t0 + 10 * S, pods)
    push_pod_errors(c, t0 - 200 * S, ["old"])  # in the first window only
    evaluate(c, ruler, run, t0 + 60 * S)
    assert [a["state"] for a in alerts(c)] == ["firing"] * 61
    assert writes() == 61

    push_pod_errors(c, t0 + 70 * S, ["p0", "p60"])  # p0 counts 2, p60 is new, old resolves
    evaluate(c, ruler, run, t0 + 120 * S)
    assert len(alerts(c)) == 61
    (resolved,) = [a for a in run.rules[0].alerts.values() if a.state == "inactive"]
    assert resolved.labels["pod"] == "old"
    assert writes() == 3  # the old code rewrote all: 61 deleted, 62 inserted

    evaluate(c, ruler, run, t0 + 180 * S)  # the same results: nothing to write
    assert len(alerts(c)) == 61
    assert writes() == 0

    # 16 minutes after it resolved the old pod's alert goes; p0 counts 1 again
    push_pod_errors(c, t0 + 1050 * S, [*pods, "p60"])
    evaluate(c, ruler, run, t0 + 1080 * S)
    assert "old" not in {a.labels["pod"] for a in run.rules[0].alerts.values()}
    assert writes() == 2
    kept = sorted(run.rules[0].state_rows())
    shown = sorted(alerts(c), key=lambda a: a["labels"]["pod"])
    c.__exit__(None, None, None)

    c = make_client(config, data_dir=data)
    ruler = paused(c)
    run = ruler.runs[("fake", "k8s", "pods")]
    assert sorted(run.rules[0].state_rows()) == kept
    assert sorted(alerts(c), key=lambda a: a["labels"]["pod"]) == shown
    assert {a["activeAt"] for a in shown} == {_rfc(t0 + 60 * S), _rfc(t0 + 120 * S)}


def test_the_stored_alerts_of_a_rule_the_group_lost_go_at_its_next_evaluation(client):
    cart = ('  - alert: CartErrors\n'
            '    expr: sum(count_over_time({job="cart"} |= "error" [1m])) > 5\n')
    ruler, run = setup_group(client, CHECKOUT + cart)
    push_errors(client, T0 + 10 * S, 7)
    push_errors(client, T0 + 10 * S, 7, job="cart")
    evaluate(client, ruler, run, T0 + 60 * S)
    assert client.post(f"{RULES}/shop", content=CHECKOUT).status_code == 202
    run = ruler.runs[("fake", "shop", "checkout")]
    push_errors(client, T0 + 70 * S, 7)  # the same count: the checkout alert is unchanged
    evaluate(client, ruler, run, T0 + 120 * S)
    stored = client.app.state.services.db.read_sync(
        lambda conn: conn.execute("SELECT rule_key, state FROM alert_states").fetchall())
    assert stored == [("0:CheckoutErrors", "pending")]


def test_deleting_a_group_stops_its_alerts(client):
    ruler, run = setup_group(client)
    push_errors(client, T0 + 10 * S, 7)
    evaluate(client, ruler, run, T0 + 60 * S)
    assert len(alerts(client)) == 1
    assert client.delete(f"{RULES}/shop/checkout").status_code == 202
    assert alerts(client) == []


# -- delivery -------------------------------------------------------------------------------------

def _config(url: str, **ruler) -> dict:
    return {"limits_config": {"reject_old_samples": False},
            "ruler": {"alertmanager_url": url, "external_url": "http://logstore.example",
                      "external_labels": {"cluster": "eu-1"}, **ruler}}


def test_alerts_reach_the_receiver_resent_and_resolved_once(make_client, receiver):
    c = make_client(_config(receiver.url, resend_delay="1m"))
    ruler, run = setup_group(c, CHECKOUT.replace("    for: 2m\n", ""))
    push_errors(c, T0 + 10 * S, 7)
    evaluate(c, ruler, run, T0 + 60 * S)
    c.blocking_portal.call(ruler.notifier.drained)
    receiver.wait_for(1)
    path, headers, body = receiver.requests[0]
    assert path == "/api/v2/alerts"
    (sent,) = json.loads(body)
    assert sent == {
        "labels": {"alertname": "CheckoutErrors", "job": "checkout", "severity": "page",
                   "team": "CHECKOUT", "cluster": "eu-1"},
        "annotations": {"ratio": "25% 1h 2m 5s 1.235M",
                        "summary": "checkout logged 7 errors in a minute"},
        "startsAt": _rfc(T0 + 60 * S), "endsAt": _rfc(T0 + 60 * S + 4 * 60 * S),
        "generatorURL": "http://logstore.example/graph?g0.expr=sum+by+%28job%29+%28count_"
                        "over_time%28%7Bjob%3D%22checkout%22%7D+%7C%3D+%22error%22+%5B1m%5D"
                        "%29%29+%3E+5&g0.tab=1"}
    push_errors(c, T0 + 100 * S, 7)
    evaluate(c, ruler, run, T0 + 120 * S)   # 1m later: not yet due again
    push_errors(c, T0 + 170 * S, 7)
    evaluate(c, ruler, run, T0 + 180 * S)   # 2m after the last send: re-sent
    evaluate(c, ruler, run, T0 + 240 * S)   # resolved: sent once, with endsAt
    evaluate(c, ruler, run, T0 + 300 * S)
    evaluate(c, ruler, run, T0 + 400 * S)
    c.blocking_portal.call(ruler.notifier.drained)
    ends = [a["endsAt"] for _, _, b in receiver.requests for a in json.loads(b)]
    assert ends == [_rfc(T0 + 300 * S), _rfc(T0 + 420 * S), _rfc(T0 + 240 * S)]
    metrics = c.get("/metrics").text
    assert f'logstore_ruler_notifications_sent_total{{alertmanager="{receiver.url}"}} 3.0' \
        in metrics


def test_a_failing_alertmanager_is_retried_and_counted(make_client, receiver):
    receiver.status = 503
    c = make_client(_config(receiver.url))
    ruler, run = setup_group(c, CHECKOUT.replace("    for: 2m\n", ""))
    push_errors(c, T0 + 10 * S, 7)
    evaluate(c, ruler, run, T0 + 60 * S)
    c.blocking_portal.call(ruler.notifier.drained)
    assert len(receiver.requests) == 3  # three tries
    metrics = c.get("/metrics").text
    assert f'logstore_ruler_notifications_errors_total{{alertmanager="{receiver.url}"}} 1.0' \
        in metrics


def test_a_hanging_alertmanager_blocks_neither_rules_nor_pushes(make_client, receiver):
    receiver.hold()  # takes every request and answers none until released
    c = make_client(_config(receiver.url, notification_timeout="200ms",
                            notification_queue_capacity=2))
    body = ("name: g\nrules:\n  - alert: Many\n    expr: sum by (n) (count_over_time("
            "{job=\"checkout\"} | regexp \"error (?P<n>\\\\d)\" [1m])) > 0\n")
    ruler, run = setup_group(c, body)
    push_errors(c, T0 + 10 * S, 7)
    evaluate(c, ruler, run, T0 + 60 * S)   # seven alerts into a queue of two
    # the state the test names: a request reached the receiver and hangs there
    assert receiver.holding.acquire(timeout=20)
    push_errors(c, T0 + 61 * S, 1)
    # both done while the receiver still holds the first request unanswered
    assert receiver.requests == []
    assert len(alerts(c)) == 7
    assert ruler.notifier.dropped == 5
    assert "logstore_ruler_notifications_dropped_total 5.0" in c.get("/metrics").text
    receiver.release()


def test_end_to_end_with_alertmanager(make_client, alertmanager, tmp_path):
    """The user's story in real time: a rule with `for: 2s` evaluated every second; error
    lines arrive, the alert goes pending, firing, reaches Alertmanager, and resolves there."""
    config = _config(alertmanager.url, evaluation_interval="1s", resend_delay="1s")
    c = make_client(config, data_dir=tmp_path / "data")
    body = ("name: checkout\nrules:\n  - alert: CheckoutErrors\n"
            "    expr: sum by (job) (count_over_time({job=\"checkout\"} |= \"error\" [2s])) > 5\n"
            "    for: 2s\n    labels:\n      severity: page\n"
            "    annotations:\n      summary: '{{ $labels.job }}: {{ $value }} errors'\n")
    assert c.post(f"{RULES}/shop", content=body).status_code == 202

    def states() -> list[str]:
        return [a["state"] for a in alerts(c)]

    def am_alerts(active: bool = True) -> list[dict]:
        return httpx.get(alertmanager.url + "/api/v2/alerts",
                         params={"active": str(active).lower(), "silenced": "false",
                                 "inhibited": "false"}, timeout=5).json()

    stop = False
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not stop:
        push_errors(c, time.time_ns(), 10)
        s = states()
        if s and (not seen or seen[-1] != s[0]):
            seen.append(s[0])
        found = [a for a in am_alerts() if a["labels"].get("alertname") == "CheckoutErrors"]
        stop = bool(found)
        time.sleep(0.2)  # pacing the pushes: lines arrive as a service would log them
    # pending first; Alertmanager has it only once it fired (it may arrive between two polls)
    assert seen[0] == "pending", seen
    assert states() == ["firing"]
    (got,) = found
    assert got["labels"] == {"alertname": "CheckoutErrors", "job": "checkout",
                             "severity": "page", "cluster": "eu-1"}
    assert got["annotations"]["summary"].startswith("checkout: ")
    assert got["status"]["state"] == "active"

    # the errors stop: the alert resolves in logstore and Alertmanager marks it resolved
    deadline = time.monotonic() + 30
    resolved = False
    while time.monotonic() < deadline and not resolved:
        left = [a for a in am_alerts() if a["labels"].get("alertname") == "CheckoutErrors"]
        resolved = not left and states() == []
        time.sleep(0.2)  # polling Alertmanager, an outside process
    assert resolved


def _rfc(ns: int) -> str:
    from services.ruler.alerting import rfc3339
    return rfc3339(ns)


@pytest.mark.parametrize("ts, now, want", [
    (60, 61, (120, 0)),      # done well within the interval
    (60, 120, (120, 0)),     # exactly at the next tick: still on time
    (60, 121, (180, 1)),     # overran one tick: skips it
    (60, 250, (300, 3)),
])
def test_a_group_that_overruns_skips_beats(ts, now, want):
    from services.ruler.ruler import next_tick
    assert next_tick(ts * S, now * S, 60 * S) == (want[0] * S, want[1])


def test_missed_iterations_are_counted(client, monkeypatch):
    ruler, run = setup_group(client)
    ts = T0 + 60 * S
    evaluate(client, ruler, run, ts)
    # the evaluation ended 2.5 intervals after it began: the next two ticks were overrun
    monkeypatch.setattr(ruler, "clock", lambda: ts + run.interval * 5 // 2)
    assert ruler.next_evaluation(run, ts) == ts + 3 * run.interval
    metrics = client.get("/metrics").text
    assert ('logstore_ruler_group_iterations_missed_total{rule_group="shop;checkout",'
            'tenant="fake"} 2.0') in metrics
