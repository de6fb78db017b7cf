"""ready, metrics, log_level, services, buildinfo, config, flush, tenancy, unknown paths."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import config as config_module
from tests.helpers import JSON_HEADERS, PUSH, now_ns, push_body

ROOT = Path(__file__).resolve().parent.parent.parent


def test_ready_and_services(client):
    r = client.get("/ready")
    assert (r.status_code, r.text) == (200, "ready\n")
    r = client.get("/services")
    assert r.status_code == 200
    lines = r.text.splitlines()
    assert {"ingester => Running", "server => Running", "store => Running"} <= set(lines)
    assert all(line.endswith(" => Running") for line in lines)


def test_ready_is_503_before_start(tmp_path):
    from litestar.testing import TestClient
    from app import create_app
    from tests.conftest import make_config
    app = create_app(make_config(tmp_path / "d"))
    # a client that never enters its context never runs the lifespan: no migrations, no
    # writer, every service still New
    r = TestClient(app).get("/ready")
    services = len(app.state.services.states.services)
    assert (r.status_code, r.text) == (503, f"Some services are not Running:\nNew: {services}\n")


def test_metrics_count_pushed_lines(client):
    body = push_body({"app": "m"}, [[str(now_ns()), "a"], [str(now_ns() + 1), "bb"]])
    assert client.post(PUSH, content=body, headers=JSON_HEADERS).status_code == 204
    r = client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'logstore_distributor_lines_received_total{tenant="fake"} 2.0' in text
    assert 'logstore_distributor_bytes_received_total{tenant="fake"} 3.0' in text
    assert "logstore_sqlite_size_bytes " in text
    assert "logstore_writer_commits_total " in text
    assert 'logstore_request_duration_seconds_count{method="POST",' \
           'route="loki_api_v1_push",status_code="204"} 1.0' in text
    assert "process_resident_memory_bytes" in text


def test_log_level(client):
    r = client.get("/log_level")
    assert r.json() == {"message": "Current log level is info"}
    r = client.post("/log_level", content="log_level=debug",
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.json() == {"status": "success", "message": "Log level set to debug"}
    assert client.get("/log_level").json() == {"message": "Current log level is debug"}
    r = client.post("/log_level?log_level=verbose")
    assert r.status_code == 400
    assert r.json() == {"status": "failed", "message": 'unrecognized log level "verbose"'}
    assert client.get("/log_level?log_level=error").json()["message"].endswith("debug")


def test_buildinfo(client):
    data = client.get("/logstore/api/v1/status/buildinfo").json()
    assert set(data) == {"version", "revision", "branch", "buildUser", "buildDate", "goVersion"}
    major = int(data["version"].split(".")[0])
    assert major >= 3


def test_config_modes(make_client):
    client = make_client({"limits_config": {"max_line_size": "1MB"}})
    full = yaml.safe_load(client.get("/config").text)
    assert full["limits_config"]["max_line_size"] == 1048576
    assert full["server"]["http_listen_port"] == 3100
    for mode in ("diff", "diffs"):
        diff = yaml.safe_load(client.get("/config", params={"mode": mode}).text)
        assert diff["limits_config"] == {"max_line_size": 1048576}
        assert "server" not in diff
    defaults = yaml.safe_load(client.get("/config", params={"mode": "defaults"}).text)
    assert defaults["limits_config"]["max_line_size"] == 262144
    assert defaults["limits_config"]["reject_old_samples_max_age"] == "1w"
    assert defaults["common"]["path_prefix"] == "./data"


def test_flush(client):
    from storage.blocks import sealing
    from tests.helpers import JSON_HEADERS, PUSH, db_path, now_ns, push_body

    assert client.post("/flush").status_code == 204  # an empty head: nothing to do
    ts = now_ns()
    r = client.post(PUSH, content=push_body({"app": "f"}, [[str(ts), "flushed"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 204
    assert client.get("/flush").status_code == 204
    # the line left the head for a block, and reads the same
    conn = sqlite3.connect(db_path(client))
    status = sealing.status(conn)
    conn.close()
    assert (status["head_rows"], status["blocks"], status["sealed_rows"]) == (0, 1, 1)
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{app="f"}', "start": str(ts - 10**9), "end": str(ts + 10**9)})
    assert [s["values"] for s in r.json()["data"]["result"]] == [[[str(ts), "flushed"]]]


def test_unknown_path_and_method(client):
    r = client.get("/nope")
    assert (r.status_code, r.text) == (404, "404 page not found\n")
    r = client.delete("/logstore/api/v1/push")
    assert r.status_code == 405


def test_ring_page(client):
    r = client.get("/ring")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "ACTIVE" in r.text


def test_tenancy(make_client):
    client = make_client({"auth_enabled": True})
    body = push_body({"app": "a"}, [[str(now_ns()), "x"]])
    r = client.post(PUSH, content=body, headers=JSON_HEADERS)
    assert (r.status_code, r.text) == (401, "no org id\n")
    r = client.get("/logstore/api/v1/labels")
    assert (r.status_code, r.text) == (401, "no org id")
    for tenant, app in (("team-a", "alpha"), ("team-b", "beta")):
        body = push_body({"app": app}, [[str(now_ns()), "x"]])
        r = client.post(PUSH, content=body, headers={**JSON_HEADERS, "X-Scope-OrgID": tenant})
        assert r.status_code == 204
    for tenant, app in (("team-a", "alpha"), ("team-b", "beta")):
        r = client.get("/logstore/api/v1/label/app/values", headers={"X-Scope-OrgID": tenant})
        assert r.json()["data"] == [app]
        r = client.get("/logstore/api/v1/series", params={"match[]": '{app=~".+"}'},
                       headers={"X-Scope-OrgID": tenant})
        assert [s["app"] for s in r.json()["data"]] == [app]
    r = client.get("/logstore/api/v1/labels", headers={"X-Scope-OrgID": "nobody"})
    assert r.json() == {"status": "success", "data": []}
    r = client.get("/logstore/api/v1/labels", headers={"X-Scope-OrgID": "a|b"})
    assert (r.status_code, r.text) == (400, "multiple org IDs present")
    r = client.get("/logstore/api/v1/labels", headers={"X-Scope-OrgID": "bad/tenant"})
    assert r.status_code == 400
    assert r.text == "tenant ID 'bad/tenant' contains unsupported character '/'"


def test_tenant_header_ignored_without_auth(client):
    body = push_body({"app": "a"}, [[str(now_ns()), "x"]])
    client.post(PUSH, content=body, headers={**JSON_HEADERS, "X-Scope-OrgID": "other"})
    assert client.get("/logstore/api/v1/label/app/values").json()["data"] == ["a"]


def test_config_layers(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(yaml.safe_dump({
        "server": {"http_listen_port": 4000, "log_level": "warn"},
        "schema_config": {"configs": []},  # a Loki key logstore has no use for: a warning
        "limits_config": {"reject_old_samples_max_age": "2d", "ingestion_rate_mb": 10}}))
    cfg = config_module.load_config(str(cfg_file), env={"LOGSTORE_PORT": "5000"})
    assert cfg.server.http_listen_port == 5000        # environment over file
    assert cfg.server.log_level == "warn"             # file over defaults
    assert cfg.limits_config.reject_old_samples_max_age == 2 * 86400 * 10**9
    cfg = config_module.load_config(str(cfg_file), env={"LOGSTORE_PORT": "5000"},
                                    overrides={("server", "http_listen_port"): 6000})
    assert cfg.server.http_listen_port == 6000        # flags over environment
    cfg = config_module.load_config(None, env={"LOGSTORE_CONFIG": str(cfg_file)})
    assert cfg.server.http_listen_port == 4000
    assert config_module.load_config(None, env={}).server.http_listen_port == 3100


@pytest.mark.parametrize("text, message", [
    ("bogus: 1\n", "unknown configuration key 'bogus'"),
    ("server:\n  http_listen_prot: 1\n", "unknown configuration key 'server.http_listen_prot'"),
    ("server:\n  log_level: loud\n", "unrecognized log level 'loud'"),
    ("- a\n- b\n", "must hold a mapping at the top level"),
    ("limits_config:\n  creation_grace_period: soon\n", "not a valid duration string"),
])
def test_config_errors(tmp_path, text, message):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(text)
    with pytest.raises(config_module.ConfigError, match=message):
        config_module.load_config(str(cfg_file), env={})


def test_migrate_and_config_commands(tmp_path):
    env = {**os.environ, "LOGSTORE_DATA_DIR": str(tmp_path / "d")}
    out = subprocess.run([sys.executable, "-m", "app", "migrate"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("applied: 0001_init.sql")
    again = subprocess.run([sys.executable, "-m", "app", "migrate"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=60)
    assert again.stdout.strip() == "applied: nothing (up to date)"
    shown = subprocess.run([sys.executable, "-m", "app", "config", "--log-level", "debug"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert yaml.safe_load(shown.stdout)["server"]["log_level"] == "debug"


@pytest.mark.parametrize("name", ["push", "remote"])
def test_generated_protobuf_matches_the_proto(tmp_path, name):
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                    f"--python_out={tmp_path}", str(ROOT / "proto" / f"{name}.proto")],
                   check=True, timeout=60)
    assert (tmp_path / f"{name}_pb2.py").read_text() == \
        (ROOT / "proto" / f"{name}_pb2.py").read_text()


def test_unexpected_errors_are_plain_500_without_traceback(client, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(client.app.state.services.ingester, "push_body", broken)
    r = client.post(PUSH, content=push_body({"app": "a"}, [[str(now_ns()), "x"]]),
                    headers=JSON_HEADERS)
    assert r.status_code == 500
    assert r.headers["content-type"].startswith("text/plain")
    # issue 28: the text names a request id the server's log carries, never the exception
    assert re.fullmatch(r"Internal Server Error \(request id [0-9a-f]{16}\)\n", r.text), r.text
    assert client.get("/ready").status_code == 200  # the server keeps serving
    # counted where loki-mixin's LokiRequestPanics alert looks
    metrics = client.get("/metrics").text
    assert "\nloki_panic_total 1.0\n" in metrics
    assert "\nlogstore_internal_errors_total 1.0\n" in metrics
