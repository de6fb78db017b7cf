"""Per-tenant limits from `runtime_config.file` (Loki's overrides): retention periods and
rules, and deletion_mode, per tenant; reloads that take effect without a restart; a bad file
refused at start and kept out on reload; GET /runtime_config."""

from __future__ import annotations

import pytest

from config import ConfigError
from services.runtime.overrides import Overrides
from tests.conftest import make_config
from tests.helpers import JSON_HEADERS, PUSH, push_body

H = 3600 * 10**9
D = 24 * H
T0 = 1_700_000_000 * 10**9
RUNTIME = """\
overrides:
  short:
    retention_period: 2d
  rules:
    retention_stream:
      - selector: '{level="debug"}'
        priority: 1
        period: 1d
  no-deletes:
    deletion_mode: disabled
"""


@pytest.fixture
def setup(make_client, tmp_path):
    runtime = tmp_path / "runtime.yaml"
    runtime.write_text(RUNTIME)
    client = make_client({
        "auth_enabled": True,
        "limits_config": {"reject_old_samples": False, "retention_period": "5d"},
        "compactor": {"retention_enabled": True, "retention_delete_delay": "0s"},
        "runtime_config": {"file": str(runtime)}})
    ctx = client.app.state.services
    ctx.retention.clock = lambda: T0
    for tenant in ("short", "rules", "other", "no-deletes"):
        for level in ("debug", "info"):
            values = [[str(T0 - k * H), f"{level} {k}"] for k in range(1, 24 * 7)]
            r = client.post(PUSH, content=push_body({"app": "x", "level": level}, values),
                            headers={**JSON_HEADERS, "X-Scope-OrgID": tenant})
            assert r.status_code == 204, r.text
    return client, ctx, runtime


def oldest_hours(client, tenant: str) -> dict[str, int]:
    """level -> how many hours back its oldest visible line is."""
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="x"}', "start": str(T0 - 8 * D), "end": str(T0), "limit": "5000"},
        headers={"X-Scope-OrgID": tenant})
    assert r.status_code == 200, r.text
    return {s["stream"]["level"]: max(int(v[1].split()[1]) for v in s["values"])
            for s in r.json()["data"]["result"]}


def test_each_tenant_keeps_its_own_period(setup):
    client, ctx, _ = setup
    assert oldest_hours(client, "short") == {"debug": 48, "info": 48}
    assert oldest_hours(client, "rules") == {"debug": 24, "info": 5 * 24}
    assert oldest_hours(client, "other") == {"debug": 5 * 24, "info": 5 * 24}
    client.blocking_portal.call(ctx.compactor.run_once)  # and on disk
    assert oldest_hours(client, "short") == {"debug": 48, "info": 48}
    assert oldest_hours(client, "other") == {"debug": 5 * 24, "info": 5 * 24}


def test_deletion_mode_per_tenant(setup):
    client, _, _ = setup
    params = {"query": '{app="x"}', "start": str((T0 - D) // 10**9)}
    r = client.post("/logstore/api/v1/delete", params=params,
                    headers={"X-Scope-OrgID": "no-deletes"})
    assert (r.status_code, r.text) == (400, "Retention is not enabled\n")
    r = client.post("/logstore/api/v1/delete", params=params,
                    headers={"X-Scope-OrgID": "other"})
    assert r.status_code == 204


def test_reload_applies_without_restart_and_a_bad_file_is_kept_out(setup):
    client, ctx, runtime = setup
    overrides = ctx.limits
    runtime.write_text("overrides:\n  other:\n    retention_period: 3d\n")
    assert overrides.reload() is True
    assert oldest_hours(client, "other") == {"debug": 72, "info": 72}
    assert oldest_hours(client, "short") == {"debug": 5 * 24, "info": 5 * 24}

    runtime.write_text("overrides:\n  other:\n    retention_perod: 1d\n")
    assert overrides.reload() is False
    assert oldest_hours(client, "other") == {"debug": 72, "info": 72}
    metrics = client.get("/metrics").text
    assert "logstore_runtime_config_last_reload_successful 0.0" in metrics


def test_runtime_config_endpoint(setup):
    client, _, _ = setup
    r = client.get("/runtime_config", params={"mode": "diff"})
    assert r.status_code == 200
    assert r.text == ("overrides:\n"
                      "  no-deletes:\n    deletion_mode: disabled\n"
                      "  rules:\n    retention_stream:\n"
                      "    - selector: '{level=\"debug\"}'\n      priority: 1\n"
                      "      period: 1d\n"
                      "  short:\n    retention_period: 2d\n")
    full = client.get("/runtime_config").text
    assert "  short:\n" in full and "    max_line_size: 262144\n" in full


@pytest.mark.parametrize("text, message", [
    ("overrides:\n  t:\n    retention_perod: 1d\n",
     "unknown configuration key 'overrides.t.retention_perod'"),
    ("overrides:\n  t:\n    retention_period: soon\n", "soon"),
    ("overrides:\n  t:\n    deletion_mode: sometimes\n",
     "overrides.t.deletion_mode must be one of disabled, filter-only, filter-and-delete"),
    ("overrides:\n  t:\n    retention_stream:\n      - selector: '{a=\"b\"'\n",
     "overrides.t.retention_stream[0].selector"),
    ("overides:\n  t: {}\n", "unknown runtime configuration key 'overides'"),
    ("overrides: [\n", "is not valid YAML"),
])
def test_bad_runtime_file_stops_the_start(tmp_path, text, message):
    runtime = tmp_path / "runtime.yaml"
    runtime.write_text(text)
    cfg = make_config(tmp_path / "data", {"runtime_config": {"file": str(runtime)}})
    with pytest.raises(ConfigError) as exc:
        Overrides(cfg.limits_config, cfg.runtime_config.file)
    assert message in str(exc.value)


def test_missing_runtime_file_stops_the_start(tmp_path):
    with pytest.raises(ConfigError, match="cannot read runtime config file"):
        Overrides(make_config(tmp_path / "d").limits_config, str(tmp_path / "nope.yaml"))
