"""Issue 24: a limit set for one tenant in the runtime file is applied to that tenant, where
limits_config's value would be, and to no other: push validation, the tail, volume, OTLP,
the ruler. A key that cannot be applied per tenant is refused when the file is loaded.

Each test gives tenant `a` its overrides and leaves `b` on limits_config, and first checks
that /runtime_config shows exactly that."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from config import ConfigError, LimitsConfig
from services.runtime import overrides as overrides_module
from services.runtime.limits import TENANT_KEYS
from services.runtime.overrides import Overrides
from tests.conftest import make_config
from tests.helpers import JSON_HEADERS, PUSH, push_body

S = 10**9
H = 3600 * S
RANGE = "/logstore/api/v1/query_range"
VOLUME = "/logstore/api/v1/index/volume"


@pytest.fixture
def tenants(make_client, tmp_path):
    """client(overrides of tenant a) -> a client with auth on, `a` overridden, `b` not."""
    def factory(overrides: dict, **extra):
        runtime = tmp_path / "runtime.yaml"
        runtime.write_text(yaml.safe_dump({"overrides": {"a": overrides}}))
        client = make_client({"auth_enabled": True, "runtime_config": {"file": str(runtime)},
                              **extra})
        shown = yaml.safe_load(client.get("/runtime_config", params={"mode": "diff"}).text)
        assert set(shown["overrides"]) == {"a"}
        assert set(shown["overrides"]["a"]) == set(overrides)
        return client
    return factory


def as_tenant(tenant: str) -> dict[str, str]:
    return {"X-Scope-OrgID": tenant}


def push(client, tenant: str, stream: dict, values: list):
    return client.post(PUSH, content=push_body(stream, values),
                       headers={**JSON_HEADERS, **as_tenant(tenant)})


def lines(client, tenant: str, query: str = '{app="x"}') -> list[tuple[dict, str]]:
    now = time.time_ns()
    r = client.get(RANGE, params={"query": query, "start": str(now - 3 * H),
                                  "end": str(now + H)}, headers=as_tenant(tenant))
    assert r.status_code == 200, r.text
    return [(s["stream"], v[1]) for s in r.json()["data"]["result"] for v in s["values"]]


# -- push validation ---------------------------------------------------------------------------

NOW = time.time_ns()
PUSH_CASES = {
    "max_line_size": (
        {"max_line_size": 16}, {"app": "x"}, [[str(NOW), "twenty bytes long..."]],
        "max entry size '16' bytes exceeded for stream '{app=\"x\", service_name=\"x\"}' "
        "while adding an entry with length '20' bytes"),
    "max_label_names_per_series": (
        {"max_label_names_per_series": 2}, {"app": "x", "env": "prod", "zone": "z1"},
        [[str(NOW), "hello"]],
        "entry for stream '{app=\"x\", env=\"prod\", service_name=\"x\", zone=\"z1\"}' has 3 "
        "label names; limit 2"),
    "max_label_value_length": (
        {"max_label_value_length": 4}, {"app": "x", "env": "production"},
        [[str(NOW), "hello"]],
        "stream '{app=\"x\", env=\"production\", service_name=\"x\"}' has label value too long: "
        "'production'"),
    "reject_old_samples_max_age": (
        {"reject_old_samples_max_age": "1h"}, {"app": "x"}, [[str(NOW - 2 * H), "old"]],
        None),  # the text names the oldest acceptable time: the prefix is checked below
    "allow_structured_metadata": (
        {"allow_structured_metadata": False}, {"app": "x"},
        [[str(NOW), "hello", {"trace_id": "abc"}]],
        "stream '{app=\"x\", service_name=\"x\"}' includes structured metadata, but this "
        "feature is disallowed. Please see `limits_config.allow_structured_metadata` or "
        "contact your Loki administrator to enable it"),
}


@pytest.mark.parametrize("case", sorted(PUSH_CASES))
def test_push_validation_is_the_pushing_tenants(tenants, case):
    overrides, stream, values, text = PUSH_CASES[case]
    client = tenants(overrides)
    r = push(client, "a", stream, values)
    assert r.status_code == 400
    if text is None:
        assert r.text.startswith("entry for stream '{app=\"x\", service_name=\"x\"}' has "
                                 "timestamp too old: ")
    else:
        assert r.text == text + "\n"
    assert lines(client, "a") == []
    assert push(client, "b", stream, values).status_code == 204
    assert [line for _, line in lines(client, "b")] == [values[0][1]]


def test_max_line_size_truncate_per_tenant(tenants):
    client = tenants({"max_line_size": 10, "max_line_size_truncate": True,
                      "max_line_size_truncate_identifier": "..."})
    for tenant in ("a", "b"):
        assert push(client, tenant, {"app": "x"}, [[str(NOW), "a line of 22 characters"]]
                    ).status_code == 204
    assert [line for _, line in lines(client, "a")] == ["a line ..."]
    assert [line for _, line in lines(client, "b")] == ["a line of 22 characters"]


def test_discovery_and_level_fields_per_tenant(tenants):
    client = tenants({"discover_service_name": [], "log_level_fields": ["sev"]})
    for tenant in ("a", "b"):
        assert push(client, tenant, {"app": "x", "sev": "error"},
                    [[str(NOW), "level=warn disk almost full"]]).status_code == 204
    query = '{app="x"} | keep app, sev, service_name, detected_level'
    assert lines(client, "a", query) == [({"app": "x", "sev": "error",
                                           "detected_level": "error"},
                                          "level=warn disk almost full")]
    assert lines(client, "b", query) == [({"app": "x", "service_name": "x", "sev": "error",
                                           "detected_level": "warn"},
                                          "level=warn disk almost full")]


def test_otlp_config_per_tenant(tenants):
    client = tenants({"otlp_config": {"log_attributes": [
        {"action": "index_label", "attributes": ["tier"]}]}})
    doc = {"resourceLogs": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "x"}}]},
        "scopeLogs": [{"logRecords": [{
            "timeUnixNano": str(NOW), "body": {"stringValue": "paid"},
            "attributes": [{"key": "tier", "value": {"stringValue": "gold"}}]}]}]}]}
    for tenant in ("a", "b"):
        r = client.post("/otlp/v1/logs", content=json.dumps(doc),
                        headers={**JSON_HEADERS, **as_tenant(tenant)})
        assert r.status_code == 204, r.text
    names = {tenant: client.get("/logstore/api/v1/labels", headers=as_tenant(tenant)
                                ).json()["data"] for tenant in ("a", "b")}
    assert names == {"a": ["service_name", "tier"], "b": ["service_name"]}


# -- reads -------------------------------------------------------------------------------------

def test_tail_entries_limit_per_tenant(tenants):
    client = tenants({"max_entries_limit_per_query": 20})
    params = {"query": '{app="x"}', "limit": "50"}
    r = client.get("/logstore/api/v1/tail", params=params, headers=as_tenant("a"))
    assert (r.status_code, r.text) == (400, "max entries limit per query exceeded, limit > "
                                            "max_entries_limit_per_query (50 > 20)")
    # b's request passes the checks; only the missing WebSocket upgrade is refused
    r = client.get("/logstore/api/v1/tail", params=params, headers=as_tenant("b"))
    assert (r.status_code, r.text) == (400, "Bad Request\n")


def test_volume_enabled_per_tenant(tenants):
    client = tenants({"volume_enabled": False})
    for tenant in ("a", "b"):
        assert push(client, tenant, {"app": "x"}, [[str(NOW), "hello"]]).status_code == 204
    params = {"query": '{app="x"}', "start": str(NOW - H), "end": str(NOW + H)}
    r = client.get(VOLUME, params=params, headers=as_tenant("a"))
    assert (r.status_code, r.text) == (404, "not found")
    r = client.get(VOLUME, params=params, headers=as_tenant("b"))
    assert r.status_code == 200
    assert [v["metric"] for v in r.json()["data"]["result"]] == [{"app": "x"}]


def test_volume_max_series_per_tenant(tenants):
    client = tenants({"volume_max_series": 1})
    for tenant in ("a", "b"):
        for app in ("x", "y"):
            assert push(client, tenant, {"app": app}, [[str(NOW), "hello"]]
                        ).status_code == 204
    params = {"query": '{app=~"x|y"}', "start": str(NOW - H), "end": str(NOW + H)}
    r = client.get(VOLUME, params=params, headers=as_tenant("a"))
    assert (r.status_code, r.text) == (
        400, "the query hit the max number of series limit (limit: 1 series)")
    r = client.get(VOLUME, params=params, headers=as_tenant("b"))
    assert r.status_code == 200 and len(r.json()["data"]["result"]) == 2


RULE_GROUP = """\
name: errors
interval: 1m
rules:
  - record: job:lines:count1m
    expr: sum(count_over_time({app="x"}[1m]))
"""


def test_ruler_queries_meet_the_tenants_limits(tenants):
    client = tenants({"max_query_range": "30s"})
    ruler = client.app.state.services.ruler
    client.blocking_portal.call(ruler.pause)
    for tenant in ("a", "b"):
        assert push(client, tenant, {"app": "x"}, [[str(NOW), "hello"]]).status_code == 204
        r = client.post("/logstore/api/v1/rules/ns", content=RULE_GROUP,
                        headers=as_tenant(tenant))
        assert r.status_code == 202, r.text
    for (tenant, _, _), run in ruler.runs.items():
        client.blocking_portal.call(ruler.evaluate, run, NOW + S)
    health = {tenant: [(s.health, s.last_error) for s in run.rules]
              for (tenant, _, _), run in ruler.runs.items()}
    assert health == {"a": [("err", "[interval] value exceeds limit: [1m] > [30s]")],
                      "b": [("ok", "")]}


# -- what the runtime file may hold -------------------------------------------------------------

def test_every_key_set_per_tenant_is_a_limits_config_key():
    # each is read through Limits.of where limits_config's value was (issue 24); today that
    # is every limits_config key, so nothing a Loki runtime file sets per tenant is ignored
    assert TENANT_KEYS == set(LimitsConfig.__struct_fields__)


def _load(tmp_path, text: str) -> Overrides:
    runtime = tmp_path / "runtime.yaml"
    runtime.write_text(text)
    cfg = make_config(tmp_path / "data", {"runtime_config": {"file": str(runtime)}})
    return Overrides(cfg.limits_config, cfg.runtime_config.file)


def test_a_key_not_applied_per_tenant_is_refused_at_load(tmp_path, monkeypatch):
    monkeypatch.setattr(overrides_module, "TENANT_KEYS", TENANT_KEYS - {"volume_enabled"})
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, "overrides:\n  a:\n    volume_enabled: false\n")
    assert str(exc.value) == (f"runtime config file {tmp_path / 'runtime.yaml'}: configuration "
                              "key 'overrides.a.volume_enabled' cannot be set per tenant, "
                              "only in limits_config")


def test_an_unknown_key_is_refused_at_load_and_on_reload(tmp_path):
    # a key of another section (distributor) is no per-tenant limit either
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, "overrides:\n  a:\n    max_recv_msg_size: 1MB\n")
    assert str(exc.value).endswith("unknown configuration key 'overrides.a.max_recv_msg_size'")

    overrides = _load(tmp_path, "overrides:\n  a:\n    max_line_size: 16\n")
    (tmp_path / "runtime.yaml").write_text("overrides:\n  a:\n    max_line_sise: 8\n")
    assert overrides.reload() is False
    assert overrides.of("a").max_line_size == 16  # the last good file stays in force
    assert overrides.of("b").max_line_size == 256 * 1024
