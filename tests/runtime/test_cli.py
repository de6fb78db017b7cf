"""The command line takes Loki's flags in Go's syntax; `logstore` alone serves, as `loki` does."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx
import pytest
import yaml

import cli
import config as config_module
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
LOKI_LOCAL = ROOT / "tests" / "fixtures" / "loki-configs" / "loki-local-config.yaml"


@pytest.fixture(autouse=True)
def _no_logstore_env(monkeypatch):
    for var in list(os.environ):
        if var.startswith("LOGSTORE_"):
            monkeypatch.delenv(var)


def test_help_is_a_usage_text(capsys):
    for spelling in ("-help", "-h", "--help"):
        assert cli.main([spelling]) == 0
        out = capsys.readouterr().out
        assert out.startswith("Usage: logstore [command] [flags]\n")
        for word in ("serve", "migrate", "config", "-config.file string",
                     "-server.http-listen-port int", "-config.expand-env", "-target string",
                     "-print-config-stderr", "--data-dir (-common.path-prefix)"):
            assert word in out
        assert "create_app" not in out


def test_version(capsys):
    assert cli.main(["-version"]) == 0
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out == (
        f"logstore, version {version} (python {platform.python_version()}, "
        f"{sys.platform}/{platform.machine()})\n")


@pytest.mark.parametrize("argv, message", [
    (["-bogus"], "logstore: flag provided but not defined: -bogus\n"),
    (["serve", "--nope=1"], "logstore: flag provided but not defined: -nope\n"),
    (["-server.http-listen-port=http"],
     'logstore: invalid value "http" for flag -server.http-listen-port: parse error\n'),
    (["-config.expand-env=yes"],
     'logstore: invalid boolean value "yes" for -config.expand-env: parse error\n'),
    (["-config.file"], "logstore: flag needs an argument: -config.file\n"),
    (["start"], "logstore: unknown command 'start' (commands: serve, migrate, config, copy-to-clickhouse, backup)\n"),
])
def test_a_bad_flag_prints_usage_and_exits_2(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert "Usage: logstore" in err


def test_only_target_all(capsys):
    assert cli.main(["config", "-target=all"]) == 0
    capsys.readouterr()
    assert cli.main(["-target=querier"]) == 1
    assert capsys.readouterr().err == (
        "logstore: -target=querier: logstore runs every component in one process, "
        "only -target=all is supported\n")


def test_flags_and_old_spellings_set_the_config(capsys, tmp_path):
    # Go's forms: -flag=value, -flag value, --flag value, a bare switch; before or after
    # the command
    assert cli.main(["-config.file", str(LOKI_LOCAL), "config", "-common.path-prefix=tmp",
                     "--server.http-listen-port", "4100", "-auth.enabled",
                     "-log.level=warn", "-server.http-listen-address=127.0.0.2"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["common"]["path_prefix"] == "tmp"
    assert shown["server"]["http_listen_port"] == 4100
    assert shown["server"]["http_listen_address"] == "127.0.0.2"
    assert shown["server"]["log_level"] == "warn"
    assert shown["auth_enabled"] is True
    assert cli.main(["config", "--config", str(LOKI_LOCAL), "--data-dir", "d", "--port=4200",
                     "--host", "127.0.0.3", "--log-level", "error",
                     "-auth.enabled=false"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert (shown["common"]["path_prefix"], shown["server"]["http_listen_port"],
            shown["server"]["http_listen_address"], shown["server"]["log_level"],
            shown["auth_enabled"]) == ("d", 4200, "127.0.0.3", "error", False)


def test_config_file_list_uses_the_first_that_exists(capsys, tmp_path):
    listed = f"{tmp_path / 'missing.yaml'},{LOKI_LOCAL}"
    assert cli.main(["config", f"-config.file={listed}"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["server"]["log_level"] == "debug"
    assert cli.main(["config", f"-config.file={tmp_path / 'missing.yaml'}"]) == 1
    assert capsys.readouterr().err == (f"logstore: cannot read config file "
                                       f"{tmp_path / 'missing.yaml'}: No such file or directory\n")


def test_an_unknown_key_exits_1_naming_all(capsys, tmp_path):
    path = tmp_path / "loki.yaml"
    path.write_text(LOKI_LOCAL.read_text() + "ingester:\n  chunk_idle_perod: 1m\nbogus: 1\n")
    assert cli.main(["config", f"-config.file={path}"]) == 1
    assert capsys.readouterr().err == ("logstore: unknown configuration keys "
                                       "'ingester.chunk_idle_perod', 'bogus'\n")


def test_the_worker_builds_the_same_config(tmp_path, monkeypatch):
    """serve() hands the granian worker the file and the environment; what the worker
    builds from them must be what the flags made."""
    path = tmp_path / "loki.yaml"
    path.write_text("server:\n  http_listen_port: ${PORT:-3200}\n"
                    "limits_config:\n  max_line_size: ${LINE:-1KB}\n")
    monkeypatch.setenv("LINE", "2KB")
    run = cli.parse(["-config.file", str(path), "-config.expand-env", "-log.level=warn",
                     "-auth.enabled", "-common.path-prefix=tmp", "-log.format=json"])
    parent = run.load()
    worker_env = {**os.environ, **cli.worker_env(run, os.environ),
                  "LOGSTORE_CONFIG": str(path)}
    worker = config_module.load_config(None, env=worker_env)
    assert worker == parent
    assert (worker.server.http_listen_port, worker.limits_config.max_line_size,
            worker.server.log_level, worker.auth_enabled, worker.data_dir) == \
        (3200, 2048, "warn", True, "tmp")


def test_loki_local_config_serves_with_flags_only(tmp_path):
    """Loki's cmd/loki/loki-local-config.yaml, unmodified, with the flags that move its data
    and port: the server starts, says once what it ignores, and the worker applied the flags."""
    port = free_port()
    log_path = tmp_path / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGSTORE_")}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", f"-config.file={LOKI_LOCAL}",
             f"-common.path-prefix={tmp_path / 'data'}", "-server.http-listen-port", str(port),
             "-auth.enabled", "-print-config-stderr", "-target=all"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()[-2000:]
            try:
                if httpx.get(url + "/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)  # polling for readiness
        else:
            pytest.fail("not ready: " + log_path.read_text()[-2000:])
        served = yaml.safe_load(httpx.get(url + "/config").text)
        assert served["auth_enabled"] is True          # the flag, over the file's false
        assert served["common"]["path_prefix"] == str(tmp_path / "data")
        assert served["server"]["log_level"] == "debug"  # the file
        assert httpx.get(url + "/loki/api/v1/labels").status_code == 401  # no X-Scope-OrgID
        assert (tmp_path / "data").is_dir()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    text = log_path.read_text()
    ignored = [line for line in text.splitlines() if "ignoring Loki configuration keys" in line]
    # once, by the process that read the flags: the worker reads the file again silently
    assert len(ignored) == 1
    assert "server.grpc_server_max_concurrent_streams" in ignored[0]
    assert "limits_config.metric_aggregation_enabled" in ignored[0]
    assert "unknown configuration key" not in text
    start = text.index("\nauth_enabled:") + 1
    printed = yaml.safe_load(text[start:text.index("\n", text.index("\nruntime_config:") + 1)])
    assert printed["server"]["http_listen_port"] == port    # -print-config-stderr
