"""Tenant isolation, driven by the app's own route list (issue 15): data, rules and delete
requests of tenant A are pushed and created, then every route is probed as tenant B. Each
route of the app must appear below, as a probe or as an exemption with its reason, so a new
endpoint cannot skip the check. On every data route A's own answer must carry A's marker
(a probe that cannot reach A's data fails: "B saw nothing" would prove nothing), and B's
answer must not. Routes that answer no tenant data answer B exactly as a tenant with no data
at all. Runs in the storage matrix (head, sealed: tests/conftest.py)."""

from __future__ import annotations

import time

import pytest

from routes.paths import logstore_path
from tests.helpers import JSON_HEADERS, push_body

NS = 10**9
NOW = time.time_ns()
# in A's label names and values, lines, fields, patterns, rule, alert and request names;
# no digit, so that the pattern miner keeps it a literal word of the pattern
MARK = "zqxsecret"
RANGE = {"start": str(NOW - 3600 * NS), "end": str(NOW + NS)}
SELECTOR = '{app=~".+"}'

# GET probes: path -> query parameters (path parameters are filled in by PATH_VALUES)
PROBES: dict[str, dict[str, str]] = {
    "/logstore/api/v1/query_range": {"query": SELECTOR, **RANGE},
    "/logstore/api/v1/query": {"query": f'sum by (app) (count_over_time({SELECTOR}[2h]))',
                               "time": str(NOW + NS)},
    "/logstore/api/v1/labels": RANGE,
    "/logstore/api/v1/label": RANGE,
    "/logstore/api/v1/label/{name:str}/values": RANGE,
    "/logstore/api/v1/series": {"match[]": SELECTOR, **RANGE},
    # counts only: A's selector, so A's answer counts A's lines and B's must count none
    "/logstore/api/v1/index/stats": {"query": f'{{app="{MARK}-app"}}', **RANGE},
    "/logstore/api/v1/index/volume": {"query": SELECTOR, **RANGE},
    "/logstore/api/v1/index/volume_range": {"query": SELECTOR, "step": "600", **RANGE},
    "/logstore/api/v1/patterns": {"query": SELECTOR, **RANGE},
    "/logstore/api/v1/detected_labels": {"query": SELECTOR, **RANGE},
    "/logstore/api/v1/detected_fields": {"query": SELECTOR, **RANGE},
    "/logstore/api/v1/detected_field/{name:str}/values": {"query": SELECTOR, **RANGE},
    "/logstore/api/v1/rules": {},
    "/logstore/api/v1/rules/{rest:path}": {},
    "/logstore/api/v1/delete": {},
    "/logstore/api/v1/cache/generation_numbers": {},
    "/logstore/api/v1/format_query": {"query": SELECTOR},
    "/logstore/api/v1/status/buildinfo": {},
    "/api/compat/query": {"query": SELECTOR, **RANGE},
    "/api/compat/label": RANGE,
    "/api/compat/label/{name:str}/values": RANGE,
    "/api/compat/series": {"match[]": SELECTOR, **RANGE},
    "/api/compat/rules": {},
    "/api/compat/rules/{rest:path}": {},
    "/compat/api/v1/rules": {},
    "/compat/api/v1/alerts": {},
    "/config": {},
    "/runtime_config": {},
    "/services": {},
    "/ready": {},
}
PATH_VALUES = {"{name:str}": "app", "{rest:path}": f"{MARK}-ns"}
# per route where the shared value would not name A's data
ROUTE_VALUES = {"/logstore/api/v1/detected_field/{name:str}/values": {"{name:str}": f"{MARK}field"}}
# probes of routes whose answer is no tenant's data: B's answer must be the answer of a
# tenant that never wrote anything
NO_TENANT_DATA = {"/logstore/api/v1/format_query", "/logstore/api/v1/status/buildinfo",
                  "/logstore/api/v1/cache/generation_numbers", "/config", "/runtime_config",
                  "/services", "/ready"}
# routes that are not a tenant read, and why
EXEMPT = {
    "/logstore/api/v1/push": "a write: B's pushes land in B (test_multitenant)",
    "/api/compat/push": "a write, as above",
    "/otlp/v1/logs": "a write, as above",
    "/logstore/api/v1/cache/generation_numbers/increase": "changes B's own number only",
    "/logstore/api/v1/tail": "WebSocket: tests/tail/test_tail.py tails per tenant",
    "/api/compat/tail": "WebSocket, as above",
    "/metrics": "the operator's: per-tenant counters and rule group names, as Loki's /metrics",
    "/openapi.json": "the API's schema, the same for everyone",
    "/": "the web page (routes/ui.py): static files, the same for everyone; its reads go "
         "through the API routes probed here",
    "/ui/{name:str}": "the web page's static files, as above",
    "/login": "Grafana's session sign-in: users, not tenants (tests/grafana)",
    "/logout": "Grafana's session sign-out, as above",
    "/flush": "operational, no tenant data", "/flush/tenant": "operational",
    "/log_level": "operational", "/ingester/shutdown": "operational",
    "/ingester/prepare_shutdown": "operational",
    "/ring": "static page", "/distributor/ring": "static page", "/ruler/ring": "static page",
    "/compactor/ring": "static page", "/indexgateway/ring": "static page",
    "/scheduler/ring": "static page", "/pattern/ring": "static page",
}
GRAFANA = "/api/"  # Grafana's API: orgs and users, not tenants (tests/grafana)


def _routes(app) -> set[str]:
    return {r.path for r in app.routes}


def _covered(path: str) -> bool:
    path = logstore_path(path)
    if path in PROBES or path in EXEMPT:
        return True
    return path.startswith(GRAFANA) and not path.startswith(("/api/compat/", "/api/prom/"))


RULES = f"""
name: {MARK}-group
rules:
  - record: {MARK}:lines
    expr: sum(count_over_time({{app="{MARK}-app"}}[1m]))
  - alert: {MARK}Alert
    expr: sum(count_over_time({{app="{MARK}-app"}}[2h])) > 0
"""


@pytest.fixture(scope="module")
def app_with_a(tmp_path_factory, storage_state):
    from tests.conftest import matrix_client
    extra = {"auth_enabled": True, "compactor": {"retention_enabled": True,
                                                 "delete_request_cancel_period": "24h"},
             "pattern_ingester": {"enabled": True}}
    with matrix_client(tmp_path_factory.mktemp("iso") / "data", extra, storage_state) as client:
        a = {"X-Scope-OrgID": "a"}
        # the marker in a label name and value, a field name and value, and the constant
        # part of the lines (so the mined pattern carries it)
        lines = [[str(NOW - i * NS), f"level=error {MARK}field={MARK}v{i % 3} {MARK} served"]
                 for i in range(50)]
        r = client.post("/logstore/api/v1/push", headers={**JSON_HEADERS, **a},
                        content=push_body({"app": f"{MARK}-app", f"{MARK}_label": f"{MARK}-v"},
                                          lines))
        assert r.status_code == 204
        # mine now: the pattern ingester otherwise mines in the background, when it wakes
        client.blocking_portal.call(client.app.state.services.patterns.catch_up)
        r = client.post(f"/logstore/api/v1/rules/{MARK}-ns", content=RULES,
                        headers={**a, "Content-Type": "application/yaml"})
        assert r.status_code == 202, r.text
        # one evaluation of A's rule group now (the ruler's own loop waits for its interval):
        # the alert fires, so /compat/api/v1/alerts has something of A's to show
        ruler = client.app.state.services.ruler
        for run in ruler.runs_of("a"):
            client.blocking_portal.call(ruler.evaluate, run, time.time_ns())
        r = client.post("/logstore/api/v1/delete", headers=a, params={
            "query": f'{{app="{MARK}-app"}} |= "{MARK}-nothing"', "start": str(NOW // NS - 60)})
        assert r.status_code == 204, r.text
        b = {"X-Scope-OrgID": "b"}
        r = client.post("/logstore/api/v1/push", headers={**JSON_HEADERS, **b},
                        content=push_body({"app": "bee"}, [[str(NOW - NS), "b line"]]))
        assert r.status_code == 204
        yield client


def test_every_route_is_probed_or_exempted(app_with_a):
    missing = sorted(p for p in _routes(app_with_a.app) if not _covered(p))
    assert missing == [], f"routes without an isolation probe or a reason: {missing}"


def _shows_a(template: str, answer) -> bool:
    """Whether an answer carries A's data: the marker, or (stats: counts only) A's lines."""
    if logstore_path(template) == "/logstore/api/v1/index/stats":
        return answer.json()["entries"] > 0
    return MARK in answer.text


def _probe(client, template: str, tenant: str):
    path = template
    values = {**PATH_VALUES, **ROUTE_VALUES.get(logstore_path(template), {})}
    for placeholder, value in values.items():
        path = path.replace(placeholder, value)
    return client.get(path, params=PROBES[logstore_path(template)],
                      headers={"X-Scope-OrgID": tenant})


def test_tenant_b_sees_nothing_of_tenant_a_on_any_route(app_with_a):
    templates = sorted(p for p in _routes(app_with_a.app) if logstore_path(p) in PROBES)
    assert len(templates) >= 2 * len(PROBES) - 12      # the Loki aliases are probed too
    unreached, leaks, differs = [], [], []
    for template in templates:
        as_b = _probe(app_with_a, template, "b")
        assert as_b.status_code < 500, (template, as_b.text)
        if logstore_path(template) in NO_TENANT_DATA:
            # nothing of A's to show: B is answered as a tenant that never wrote anything
            if as_b.text != _probe(app_with_a, template, "nobody").text:
                differs.append(template)
            continue
        as_a = _probe(app_with_a, template, "a")
        assert as_a.status_code == 200, (template, as_a.text)
        if not _shows_a(template, as_a):
            unreached.append(template)      # the probe cannot see A's data: it proves nothing
        if _shows_a(template, as_b):
            leaks.append(template)
    assert unreached == [], unreached
    assert leaks == [], leaks
    assert differs == [], differs


def test_tenant_b_gets_zero_stats_and_cannot_touch_a(app_with_a):
    c = app_with_a
    b = {"X-Scope-OrgID": "b"}
    r = c.get("/logstore/api/v1/index/stats", params={"query": f'{{app="{MARK}-app"}}', **RANGE},
              headers=b)
    assert r.json() == {"streams": 0, "chunks": 0, "entries": 0, "bytes": 0}
    # B deleting A's rule namespace or cancelling A's delete request changes nothing of A's
    assert c.delete(f"/logstore/api/v1/rules/{MARK}-ns", headers=b).status_code in (202, 404)
    assert c.get(f"/logstore/api/v1/rules/{MARK}-ns",
                 headers={"X-Scope-OrgID": "a"}).status_code == 200
    [req] = c.get("/logstore/api/v1/delete", headers={"X-Scope-OrgID": "a"}).json()
    r = c.delete("/logstore/api/v1/delete", params={"request_id": req["request_id"]}, headers=b)
    assert r.status_code == 404
    assert c.get("/logstore/api/v1/delete", headers={"X-Scope-OrgID": "a"}).json() == [req]
