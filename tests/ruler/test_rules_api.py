"""The rules API (spec/http-api.md 13.1-13.4): the YAML round trip as Loki prints it, every
error text of 13.2, tenants kept apart, groups that survive a restart, the Prometheus views."""

from __future__ import annotations

import pytest

RULES = "/logstore/api/v1/rules"
GROUP = """\
name: api-errors
interval: 1m
rules:
  - record: app:error_lines:rate5m
    expr: sum by (app) (rate({app=~".+"} |= "error" [5m]))
    labels:
      team: core
  - alert: HighErrorRate
    expr: sum by (app) (rate({app=~".+"} |= "error" [5m])) > 10
    for: 5m
    labels:
      severity: page
    annotations:
      summary: "{{ $labels.app }} logs {{ $value }} errors/s"
"""
LISTED = """\
api:
    - name: api-errors
      interval: 1m
      rules:
        - record: app:error_lines:rate5m
          expr: sum by (app) (rate({app=~".+"} |= "error" [5m]))
          labels:
            team: core
        - alert: HighErrorRate
          expr: sum by (app) (rate({app=~".+"} |= "error" [5m])) > 10
          for: 5m
          labels:
            severity: page
          annotations:
            summary: '{{ $labels.app }} logs {{ $value }} errors/s'
"""
ONE = """\
name: api-errors
interval: 1m
rules:
    - record: app:error_lines:rate5m
      expr: sum by (app) (rate({app=~".+"} |= "error" [5m]))
      labels:
        team: core
    - alert: HighErrorRate
      expr: sum by (app) (rate({app=~".+"} |= "error" [5m])) > 10
      for: 5m
      labels:
        severity: page
      annotations:
        summary: '{{ $labels.app }} logs {{ $value }} errors/s'
"""
ACCEPTED = {"status": "success", "data": None, "errorType": "", "error": ""}
A = {"X-Scope-OrgID": "team-a"}
B = {"X-Scope-OrgID": "team-b"}


@pytest.fixture
def client(make_client):
    return make_client({"auth_enabled": True})


def post(client, namespace: str, body: str, headers=A):
    return client.post(f"{RULES}/{namespace}", content=body, headers=headers)


def test_set_list_get_delete(client):
    r = post(client, "api", GROUP)
    assert (r.status_code, r.json()) == (202, ACCEPTED)
    r = client.get(RULES, headers=A)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/yaml"
    assert r.text == LISTED
    assert client.get(f"{RULES}/api", headers=A).text == LISTED
    one = client.get(f"{RULES}/api/api-errors", headers=A)
    assert one.status_code == 200
    assert one.text == ONE
    # the same under the compat and Loki names
    assert client.get("/api/compat/rules", headers=A).text == LISTED
    assert client.get("/loki/api/v1/rules", headers=A).text == LISTED
    assert client.get("/api/prom/rules/api", headers=A).text == LISTED

    r = client.delete(f"{RULES}/api/api-errors", headers=A)
    assert (r.status_code, r.json()) == (202, ACCEPTED)
    r = client.get(RULES, headers=A)
    assert (r.status_code, r.text) == (404, "no rule groups found\n")


def test_posting_a_group_again_replaces_it(client):
    post(client, "api", GROUP)
    post(client, "api", "name: api-errors\nrules:\n  - record: x:y\n    expr: "
                        "sum(count_over_time({a=\"b\"}[1m]))\n")
    assert client.get(f"{RULES}/api", headers=A).text == (
        "api:\n    - name: api-errors\n      rules:\n        - record: x:y\n"
        "          expr: sum(count_over_time({a=\"b\"}[1m]))\n")


def test_labels_filter(client):
    post(client, "api", GROUP)
    post(client, "web", "name: other\nrules:\n  - alert: Down\n    expr: "
                        "sum(count_over_time({a=\"b\"}[1m])) < 1\n    labels:\n      team: web\n")
    r = client.get(RULES, params={"labels": "severity:page,team:web"}, headers=A)
    assert r.text == (
        "api:\n    - name: api-errors\n      interval: 1m\n      rules:\n"
        "        - alert: HighErrorRate\n"
        "          expr: sum by (app) (rate({app=~\".+\"} |= \"error\" [5m])) > 10\n"
        "          for: 5m\n          labels:\n            severity: page\n"
        "          annotations:\n"
        "            summary: '{{ $labels.app }} logs {{ $value }} errors/s'\n"
        "web:\n    - name: other\n      rules:\n        - alert: Down\n"
        "          expr: sum(count_over_time({a=\"b\"}[1m])) < 1\n"
        "          labels:\n            team: web\n")


@pytest.mark.parametrize("body, text", [
    ("name: [unclosed", "unable to decoded rule group"),
    ("- a\n- b\n", "unable to decoded rule group"),
    ("name: g\ninterval: soon\nrules: []\n", "unable to decoded rule group"),
    ("name: g\nrules:\n  - alert: A\n    expr: sum(rate({a=\"b\"}[1m]))\n    for: 5 minutes\n",
     "unable to decoded rule group"),
    ("name: g\nrules:\n  - alert: A\n    expr: sum(rate({a=\"b\"}[1m]))\n"
     "    keep_firing_for: x\n", "unable to decoded rule group"),
    ("rules: []\n", "group 0: Groupname must not be empty"),
    ("name: g\nrules:\n  - alert: A\n    record: b\n    expr: sum(rate({a=\"b\"}[1m]))\n",
     "only one of 'record' and 'alert' must be set"),
    ("name: g\nrules:\n  - expr: sum(rate({a=\"b\"}[1m]))\n",
     "one of 'record' or 'alert' must be set"),
    ("name: g\nrules:\n  - alert: A\n", "field 'expr' must be set in rule"),
    ("name: g\nrules:\n  - alert: A\n    expr: sum(rate({a=\"b\"[1m]))\n",
     "could not parse expression for alert 'A' in group 'g': parse error at line 0, col 16: "
     "syntax error: unexpected RANGE, expecting } or ,"),
    ("name: g\nrules:\n  - record: r\n    expr: sum(\n",
     "could not parse expression for record 'r' in group 'g': parse error at line 1, col 5: "
     "syntax error: unexpected $end"),
    ("name: g\nrules:\n  - alert: A\n    expr: '{a=\"b\"} |= \"x\"'\n",
     "invalid expression for alert 'A' in group 'g': rules need a metric query, not a log "
     "query"),
    ("name: g\nrules:\n  - record: r\n    expr: sum(rate({a=\"b\"}[1m]))\n    annotations:\n"
     "      a: b\n", "invalid field 'annotations' in recording rule"),
    ("name: g\nrules:\n  - record: r\n    expr: sum(rate({a=\"b\"}[1m]))\n    for: 1m\n",
     "invalid field 'for' in recording rule"),
    ("name: g\nrules:\n  - record: 'not a name'\n    expr: sum(rate({a=\"b\"}[1m]))\n",
     "invalid recording rule name: not a name"),
    ("name: g\nrules:\n  - alert: A\n    expr: sum(rate({a=\"b\"}[1m]))\n    labels:\n"
     "      a-b: c\n", "invalid label name: a-b"),
    ("name: g\nrules:\n  - alert: A\n    expr: sum(rate({a=\"b\"}[1m]))\n    labels:\n"
     "      __name__: c\n", "invalid label name: __name__"),
    ("name: g\nrules:\n  - alert: A\n    expr: sum(rate({a=\"b\"}[1m]))\n    annotations:\n"
     "      9x: c\n", "invalid annotation name: 9x"),
    ("name: g\nrules:\n  - alert: A\n    expr: sum(rate({a=\"b\"}[1m]))\n    annotations:\n"
     "      summary: '{{ $labels.app'\n",
     'annotation "summary": template: __alert_A:1: unclosed action'),
    ("name: g\nrules:\n  - alert: A\n    expr: sum(rate({a=\"b\"}[1m]))\n    labels:\n"
     "      x: '{{ nosuch }}'\n",
     'label "x": template: __alert_A:1: function "nosuch" not defined'),
    # every failure, joined
    ("rules:\n  - alert: A\n  - record: 'b c'\n    expr: sum(rate({a=\"b\"}[1m]))\n",
     "group 0: Groupname must not be empty, field 'expr' must be set in rule, "
     "invalid recording rule name: b c"),
])
def test_errors(client, body, text):
    r = post(client, "ns", body)
    assert (r.status_code, r.text) == (400, text + "\n")
    assert r.headers["content-type"].startswith("text/plain")
    assert client.get(RULES, headers=A).status_code == 404  # nothing stored


def test_not_found_texts(client):
    assert client.get(RULES, headers=A).text == "no rule groups found\n"
    post(client, "api", GROUP)
    r = client.get(f"{RULES}/other", headers=A)
    assert (r.status_code, r.text) == (404, "no rule groups found\n")
    r = client.get(f"{RULES}/api/nope", headers=A)
    assert (r.status_code, r.text) == (404, "group does not exist\n")
    r = client.delete(f"{RULES}/api/nope", headers=A)
    assert (r.status_code, r.text) == (404, "group does not exist\n")
    r = client.delete(f"{RULES}/other", headers=A)
    assert (r.status_code, r.text) == (404, "group namespace does not exist\n")


def test_path_traversal_and_missing_tenant(client):
    r = client.post(f"{RULES}/%2E%2E", content=GROUP, headers=A)
    assert (r.status_code, r.json()) == (500, {
        "status": "error", "data": None, "errorType": "server",
        "error": "invalid namespace: path traversal not allowed"})
    r = client.get(f"{RULES}/api/..%2F..%2Fetc", headers=A)
    assert r.json()["error"] == "invalid groupname: path traversal not allowed"
    r = client.get(RULES)
    assert (r.status_code, r.json()["error"]) == (500, "no org id")
    r = client.get("/compat/api/v1/rules")
    assert (r.status_code, r.json()["error"]) == (500, "no valid org id found")
    r = client.get("/compat/api/v1/rules", headers={"X-Scope-OrgID": "a|b"})
    assert (r.status_code, r.json()) == (400, {"status": "error", "data": None,
                                                "errorType": "bad_data",
                                                "error": "too many org ids found"})


def test_a_namespace_may_hold_a_slash(client):
    assert post(client, "team%2Fapi", GROUP).status_code == 202
    assert client.get(RULES, headers=A).text.startswith("team/api:\n")
    assert client.get(f"{RULES}/team%2Fapi/api-errors", headers=A).status_code == 200


def test_tenants_are_apart(client):
    post(client, "api", GROUP, A)
    assert client.get(RULES, headers=B).status_code == 404
    assert client.get(f"{RULES}/api/api-errors", headers=B).status_code == 404
    assert client.delete(f"{RULES}/api", headers=B).status_code == 404
    assert client.get("/compat/api/v1/rules", headers=B).json()["data"] == {"groups": []}
    assert client.get("/compat/api/v1/alerts", headers=B).json()["data"] == {"alerts": []}
    assert client.get(RULES, headers=A).text == LISTED


def test_groups_survive_a_restart(make_client, tmp_path):
    data = tmp_path / "keep"
    c = make_client({"auth_enabled": True}, data_dir=data)
    post(c, "api", GROUP)
    c.__exit__(None, None, None)
    again = make_client({"auth_enabled": True}, data_dir=data)
    assert again.get(RULES, headers=A).text == LISTED
    groups = again.get("/compat/api/v1/rules", headers=A).json()["data"]["groups"]
    assert [g["name"] for g in groups] == ["api-errors"]


def test_prometheus_rules_before_any_evaluation_and_filters(client):
    post(client, "api", GROUP)
    post(client, "web", "name: w\ninterval: 30s\nrules:\n  - alert: Quiet\n    expr: "
                        "sum(count_over_time({a=\"b\"}[1m])) < 1\n")
    r = client.get("/prometheus/api/v1/rules", headers=A)
    assert r.status_code == 200
    groups = r.json()["data"]["groups"]
    assert [g["file"] for g in groups] == ["api", "web"]
    api = groups[0]
    assert api == {
        "name": "api-errors", "file": "api", "interval": 60, "limit": 0,
        "lastEvaluation": "0001-01-01T00:00:00Z", "evaluationTime": 0.0,
        "rules": [
            {"name": "app:error_lines:rate5m",
             "query": 'sum by (app) (rate({app=~".+"} |= "error" [5m]))',
             "labels": {"team": "core"}, "health": "unknown", "lastError": "",
             "type": "recording", "lastEvaluation": "0001-01-01T00:00:00Z",
             "evaluationTime": 0.0},
            {"state": "unknown", "name": "HighErrorRate",
             "query": 'sum by (app) (rate({app=~".+"} |= "error" [5m])) > 10',
             "duration": 300, "labels": {"severity": "page"},
             "annotations": {"summary": "{{ $labels.app }} logs {{ $value }} errors/s"},
             "alerts": [], "health": "unknown", "lastError": "", "type": "alerting",
             "lastEvaluation": "0001-01-01T00:00:00Z", "evaluationTime": 0.0}]}
    assert groups[1]["interval"] == 30

    def names(**params):
        r = client.get("/compat/api/v1/rules", params=params, headers=A)
        return [(g["file"], [x["name"] for x in g["rules"]]) for g in r.json()["data"]["groups"]]

    assert names(type="alert") == [("api", ["HighErrorRate"]), ("web", ["Quiet"])]
    assert names(type="RECORD") == [("api", ["app:error_lines:rate5m"])]
    assert names(**{"rule_name[]": "Quiet"}) == [("web", ["Quiet"])]
    assert names(rule_group="api-errors") == [("api", ["app:error_lines:rate5m",
                                                       "HighErrorRate"])]
    assert names(**{"file[]": "web"}) == [("web", ["Quiet"])]
    r = client.get("/compat/api/v1/rules", params={"type": "both"}, headers=A)
    assert (r.status_code, r.json()["error"]) == (400, 'not supported value "both"')


def test_api_off(make_client):
    c = make_client({"ruler": {"enable_api": False}})
    assert c.get(RULES).status_code == 404
    assert c.get("/compat/api/v1/rules").status_code == 404
