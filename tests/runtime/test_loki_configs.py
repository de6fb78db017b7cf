"""Loki's own configuration files start logstore unmodified: Loki's keys logstore has no use
for are ignored with one warning, and keys Loki does not know either are all named at once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

import config as config_module
from config import ConfigError, config_from_dict, load_config
from config import reference
from config.expand import expand_env

LOKI_CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "loki-configs"


def _ignored_line(caplog) -> str:
    lines = [r.getMessage() for r in caplog.records if "ignoring Loki configuration" in
             r.getMessage()]
    assert len(lines) == 1, lines
    return lines[0]


def test_loki_local_config_loads_and_warns_once(caplog):
    caplog.set_level(logging.WARNING, logger="logstore.config")
    cfg = load_config(str(LOKI_CONFIGS / "loki-local-config.yaml"), env={})
    # the keys logstore applies
    assert (cfg.auth_enabled, cfg.server.http_listen_port, cfg.server.log_level) == \
        (False, 3100, "debug")
    assert cfg.common.path_prefix == "/tmp/loki"
    assert cfg.pattern_ingester.enabled is True
    assert cfg.ruler.alertmanager_url == "http://localhost:9093"
    # the ones it does not, in one line: the two that stopped the start one at a time before
    assert _ignored_line(caplog) == (
        "ignoring Loki configuration keys logstore has no use for: common.instance_addr, "
        "common.replication_factor, common.ring, common.storage, frontend, "
        "limits_config.metric_aggregation_enabled, pattern_ingester.metric_aggregation, "
        "query_range, schema_config, server.grpc_listen_port, "
        "server.grpc_server_max_concurrent_streams")


def test_loki_docker_config_loads():
    cfg = load_config(str(LOKI_CONFIGS / "loki-docker-config.yaml"), env={})
    assert (cfg.common.path_prefix, cfg.auth_enabled) == ("/loki", False)


def test_production_config_loads_with_expand_env(caplog):
    # production/docker: S3, memberlist, tsdb v13, limits, compactor retention, and a
    # ${VAR:-default} reference that only -config.expand-env resolves
    caplog.set_level(logging.WARNING, logger="logstore.config")
    path = str(LOKI_CONFIGS / "production-docker-loki.yaml")
    cfg = load_config(path, env={}, expand_env=True,
                      overrides={("common", "path_prefix"): "tmp"})
    assert cfg.auth_enabled is True
    assert cfg.common.path_prefix == "tmp"
    assert cfg.compactor.retention_enabled is True
    assert cfg.compactor.compaction_interval == 5 * 60 * 10**9
    assert cfg.limits_config.retention_period == 336 * 3600 * 10**9
    assert cfg.limits_config.reject_old_samples_max_age == 30 * 60 * 10**9
    assert cfg.limits_config.ingestion_rate_mb == 100
    assert cfg.query_scheduler.max_outstanding_requests_per_tenant == 1024
    assert list(cfg.ruler.remote_write.clients) == ["local"]
    ignored = _ignored_line(caplog)
    for key in ("storage_config", "memberlist", "ingester", "schema_config",
                "compactor.horizontal_scaling_mode", "limits_config.split_queries_by_interval",
                "ruler.remote_write.clients.local.queue_config"):
        assert key in ignored.split(": ", 1)[1].split(", ")


def test_every_unknown_key_is_named_in_one_error():
    data = yaml.safe_load((LOKI_CONFIGS / "loki-local-config.yaml").read_text())
    data["server"]["http_listen_prot"] = 1
    data["limits_config"]["max_line_sise"] = "1MB"
    data["schema_config"]["configs"][0]["index"]["perod"] = "24h"   # inside an ignored section
    data["common"]["storage"]["filesystem"]["chunk_dir"] = "/x"
    data["nonsense"] = True
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data)
    assert str(exc.value) == (
        "unknown configuration keys 'server.http_listen_prot', "
        "'common.storage.filesystem.chunk_dir', 'limits_config.max_line_sise', "
        "'schema_config.configs[0].index.perod', 'nonsense'")


def test_unknown_keys_are_named_even_beside_a_bad_value():
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"limits_config": {"query_timeout": "soon", "max_line_sise": 1},
                          "bogus": 1})
    assert str(exc.value) == ("unknown configuration keys 'limits_config.max_line_sise', "
                              "'bogus'; not a valid duration string: 'soon'")


def test_loki_limits_in_a_tenant_override_are_ignored_not_refused():
    from services.runtime.limits import TENANT_KEYS

    defaults = config_module.LimitsConfig()
    limits = config_module.check_limits(
        defaults, {"max_line_size": "1KB", "max_chunks_per_query": 10}, "overrides.t",
        frozenset(TENANT_KEYS))
    assert limits.max_line_size == 1024
    with pytest.raises(ConfigError) as exc:
        config_module.check_limits(defaults, {"max_chunks_per_qery": 1, "max_line_sise": 1},
                                   "overrides.t", frozenset(TENANT_KEYS))
    assert str(exc.value) == ("unknown configuration keys 'overrides.t.max_chunks_per_qery', "
                              "'overrides.t.max_line_sise'")


@pytest.mark.parametrize("text, env, expected", [
    ("${PORT}", {"PORT": "1"}, "1"),
    ("${PORT:-9}", {}, "9"),
    ("${PORT:-9}", {"PORT": ""}, "9"),
    ("${PORT-9}", {"PORT": ""}, ""),
    ("$PORT/x", {"PORT": "2"}, "2/x"),
    ("${NOPE}", {}, ""),
    ("a$ b", {}, "a$ b"),
])
def test_expand_env_forms(text, env, expected):
    assert expand_env(text, env) == expected


def test_expand_env_applies_only_when_asked(tmp_path):
    path = tmp_path / "loki.yaml"
    path.write_text("server:\n  http_listen_port: ${PORT:-3200}\n")
    assert load_config(str(path), env={"PORT": "4100"}, expand_env=True) \
        .server.http_listen_port == 4100
    assert load_config(str(path), env={}, expand_env=True).server.http_listen_port == 3200
    with pytest.raises(ConfigError, match="invalid configuration"):
        load_config(str(path), env={"PORT": "4100"})
    path.write_text("server:\n  http_listen_port: ${PORT:?set PORT}\n")
    with pytest.raises(ConfigError) as exc:
        load_config(str(path), env={}, expand_env=True)
    assert str(exc.value) == f"config file {path}: PORT: set PORT"


def test_reference_covers_every_3x_release():
    refs = reference.releases()
    assert refs[0] == "v3.0.1" and refs[-1].startswith("main@")
    # a key Loki 3.8 removed is still accepted: a 3.0 file keeps working
    assert reference.lookup(("limits_config", "allow_deletes")) is None
    assert reference.lookup(("storage_config", "boltdb_shipper", "active_index_directory")) is None
    assert reference.lookup(("server", "grpc_server_max_concurrent_stream")) is \
        reference.MISSING
