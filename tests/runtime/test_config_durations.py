"""Durations in the configuration: read in Prometheus or Go form (or as seconds), printed by
/config and `logstore config` as Prometheus prints them (Loki's model.Duration)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

import config as config_module
from tests.conftest import ROOT


def limits(client) -> dict:
    r = client.get("/config")
    assert r.status_code == 200
    return yaml.safe_load(r.text)["limits_config"]


def test_defaults_print_as_loki_prints_them(client):
    got = limits(client)
    assert (got["max_query_length"], got["query_timeout"], got["reject_old_samples_max_age"],
            got["creation_grace_period"]) == ("30d1h", "1m", "1w", "10m")


@pytest.mark.parametrize("text, printed", [
    ("721h", "30d1h"), ("2w", "2w"), ("15d", "15d"), ("14d", "2w"), ("1.5h", "1h30m"), (90, "1m30s"),
    ("1h30m", "1h30m"), ("500ms", "500ms"), ("1y", "1y"),
])
def test_written_forms(make_client, text, printed):
    client = make_client({"limits_config": {"max_query_length": text}})
    assert limits(client)["max_query_length"] == printed


def test_a_bad_duration_names_itself():
    with pytest.raises(config_module.ConfigError) as info:
        config_module.config_from_dict({"limits_config": {"query_timeout": "soon"}})
    assert str(info.value) == "not a valid duration string: 'soon'"


def test_the_config_command_prints_the_same(tmp_path):
    path = tmp_path / "logstore.yaml"
    path.write_text("limits_config:\n  max_query_length: 721h\n")
    out = subprocess.run([sys.executable, "-m", "app", "config", "--config", str(path)],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert yaml.safe_load(out)["limits_config"]["max_query_length"] == "30d1h"
