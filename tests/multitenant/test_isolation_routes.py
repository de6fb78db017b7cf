"""Tenant isolation, driven by the app's own route list (issue 15): data, rules and delete
requests of tenant A are pushed and created, then every route is probed as tenant B. Each
route of the app must appear below, as a probe or as an exemption with its reason, so a new
endpoint cannot skip the check; B's answers must never carry anything of A's, while A's
own answers on the same probes do (so the probes are known to reach data)."""

from __future__ import annotations

import time

import pytest

from routes.paths import logstore_path
from tests.helpers import JSON_HEADERS, push_body

NS = 10**9
NOW = time.time_ns()
MARK = "zq7secret"          # in A's label values, lines, fields, rule and request names
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
    "/logstore/api/v1/index/stats": {"query": SELECTOR, **RANGE},
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
"""


@pytest.fixture(scope="module")
def app_with_a(tmp_path_factory):
    from litestar.testing import TestClient

    from app import create_app
    from tests.conftest import make_config
    cfg = make_config(tmp_path_factory.mktemp("iso") / "data", {
        "auth_enabled": True, "compactor": {"retention_enabled": True,
                                            "delete_request_cancel_period": "24h"},
        "pattern_ingester": {"enabled": True}})
    with TestClient(create_app(cfg)) as client:
        a = {"X-Scope-OrgID": "a"}
        lines = [[str(NOW - i * NS), f"level=error {MARK}field=v{i} msg={MARK}-line"]
                 for i in range(50)]
        r = client.post("/logstore/api/v1/push", headers={**JSON_HEADERS, **a},
                        content=push_body({"app": f"{MARK}-app"}, lines))
        assert r.status_code == 204
        r = client.post(f"/logstore/api/v1/rules/{MARK}-ns", content=RULES,
                        headers={**a, "Content-Type": "application/yaml"})
        assert r.status_code == 202, r.text
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


def _probe(client, template: str, tenant: str):
    path = template
    for placeholder, value in PATH_VALUES.items():
        path = path.replace(placeholder, value)
    return client.get(path, params=PROBES[logstore_path(template)],
                      headers={"X-Scope-OrgID": tenant})


def test_tenant_b_sees_nothing_of_tenant_a_on_any_route(app_with_a):
    templates = sorted(p for p in _routes(app_with_a.app) if logstore_path(p) in PROBES)
    assert len(templates) >= 2 * len(PROBES) - 12      # the Loki aliases are probed too
    leaks, seen_by_a = [], set()
    for template in templates:
        as_b = _probe(app_with_a, template, "b")
        assert as_b.status_code < 500, (template, as_b.text)
        if MARK in as_b.text:
            leaks.append(template)
        if MARK in _probe(app_with_a, template, "a").text:
            seen_by_a.add(logstore_path(template))
    assert leaks == []
    # the probes reach A's data: these answer A with it
    assert {"/logstore/api/v1/query_range", "/logstore/api/v1/query",
            "/logstore/api/v1/label/{name:str}/values", "/logstore/api/v1/series",
            "/logstore/api/v1/index/volume", "/logstore/api/v1/index/volume_range",
            "/logstore/api/v1/detected_fields",
            "/logstore/api/v1/rules", "/logstore/api/v1/rules/{rest:path}",
            "/logstore/api/v1/delete", "/api/compat/query", "/api/compat/series",
            "/api/compat/label/{name:str}/values", "/api/compat/rules",
            "/compat/api/v1/rules"} <= seen_by_a


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
