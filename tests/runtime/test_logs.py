"""logstore's own log lines (services/runtime/logs.py): logfmt that logstore's `| logfmt`
reads back, or one JSON object per line; a real server's whole output, granian's lines
included, pushed back into logstore and parsed without errors."""

from __future__ import annotations

import io
import json
import logging
import re

import httpx
import pytest
from litestar.testing import TestClient

import config as config_module
from app import create_app, main
from logql.pipeline.parsers import scan_logfmt
from services.runtime import logs
from tests.conftest import make_config
from tests.helpers import now_ns

AWKWARD = [
    "plain",
    "two words",
    'said "hi" and left',
    "a=b c==d =",
    "first line\nsecond line",
    "one\nword",
    "tab\there\rand\x00nul",
    "back\\slash \\n not a newline",
    "ünïcödé ✓ 日本語",
    "",
    '"',
    "\\",
]
TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def emit(log_format: str, message: str, *args, exc: BaseException | None = None,
         **extra) -> str:
    """What one record logged through logstore's formatter writes."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.formatter(log_format))
    logger = logging.getLogger("logstore.test_logs")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        if exc is not None:
            try:
                raise exc
            except BaseException:
                logger.exception(message, *args, extra=extra)
        else:
            logger.warning(message, *args, extra=extra)
    finally:
        logger.removeHandler(handler)
    return out.getvalue()


def parsed(line: str) -> dict[str, str]:
    """The keys of one logfmt line as logstore's `| logfmt --strict` reads them."""
    pairs, error = scan_logfmt(line, strict=True)
    assert error is None, (line, error)
    return dict(pairs)


@pytest.mark.parametrize("message", AWKWARD)
def test_logfmt_lines_parse_back_to_the_same_message(message):
    text = emit("logfmt", message, **{"data_dir": message, "rows": 3})
    assert text.endswith("\n") and text.count("\n") == 1  # one line, whatever the message
    keys = parsed(text[:-1])
    assert list(keys)[:4] == ["level", "ts", "caller", "msg"]
    assert keys["level"] == "warn" and TS.fullmatch(keys["ts"])
    assert keys["caller"].startswith("test_logs.py:")
    assert keys["msg"] == message and keys["data_dir"] == message and keys["rows"] == "3"


def test_an_exception_is_one_line_with_its_traceback():
    text = emit("logfmt", "failed on %s", "x y", exc=ValueError('bad "value"\nhere'))
    assert text.count("\n") == 1
    keys = parsed(text[:-1])
    assert keys["level"] == "error" and keys["msg"] == "failed on x y"
    assert keys["exception"].startswith("Traceback (most recent call last):\n")
    assert keys["exception"].endswith('ValueError: bad "value"\nhere')


@pytest.mark.parametrize("message", AWKWARD)
def test_json_lines_are_one_object_each(message):
    text = emit("json", message, exc=RuntimeError(f"<{message}>"), rows=3)
    assert text.count("\n") == 1
    obj = json.loads(text)
    assert list(obj)[:4] == ["level", "ts", "caller", "msg"]
    assert obj["level"] == "error" and TS.fullmatch(obj["ts"]) and obj["msg"] == message
    assert obj["rows"] == 3 and obj["exception"].endswith(f"RuntimeError: <{message}>")


def test_log_format_from_config_and_environment(tmp_path):
    assert config_module.Config().server.log_format == "logfmt"
    cfg = config_module.load_config(env={"LOGSTORE_LOG_FORMAT": "json"})
    assert cfg.server.log_format == "json"
    with pytest.raises(config_module.ConfigError,
                       match="unrecognized log format 'xml' .server.log_format is one of "
                             "logfmt, json."):
        config_module.config_from_dict({"server": {"log_format": "xml"}})


def test_warnings_read_with_the_config_are_written_in_its_format(tmp_path, capsys):
    path = tmp_path / "loki.yaml"
    path.write_text("server:\n  log_format: json\n  grpc_listen_port: 9095\n")
    try:
        assert main(["config", "--config", str(path)]) == 0
        err = capsys.readouterr().err.splitlines()
        warning = json.loads(err[0])
        assert warning["level"] == "warn" and "server.grpc_listen_port" in warning["msg"]
    finally:
        logs.configure()


def query(client: TestClient, q: str) -> list[str]:
    r = client.get("/loki/api/v1/query_range", params={
        "query": q, "start": str(now_ns() - 3600 * 10**9), "end": str(now_ns() + 10**9),
        "limit": "5000", "direction": "forward"})
    assert r.status_code == 200, r.text
    return [v[1] for s in r.json()["data"]["result"] for v in s["values"]]


def test_a_servers_own_output_reads_back_through_logfmt(make_server, tmp_path):
    server = make_server()
    base = now_ns()
    body = {"streams": [{"stream": {"job": "app"},
                         "values": [[str(base + i), f"line {i}"] for i in range(5)]}]}
    assert httpx.post(server.url + "/loki/api/v1/push", json=body).status_code == 204
    server.stop()
    assert server.proc.returncode == 0
    output = server.log_path.read_text().splitlines()
    # the states the lines below are about were reached: granian ran, logstore stopped
    assert any("Starting granian" in line for line in output), output
    assert any('msg="logstore stopped"' in line for line in output), output

    cfg = make_config(tmp_path / "readback")
    with TestClient(create_app(cfg)) as client:
        values = [[str(base + i), line] for i, line in enumerate(output)]
        r = client.post("/loki/api/v1/push", json={"streams": [
            {"stream": {"job": "logstore"}, "values": values}]})
        assert r.status_code == 204, r.text
        assert len(query(client, '{job="logstore"}')) == len(output)
        assert query(client, '{job="logstore"} | logfmt --strict | __error__!=""') == []
        assert query(client, '{job="logstore"} | logfmt | __error__!=""') == []
        assert query(client, '{job="logstore"} | logfmt | msg=""') == []  # each has its msg
        info = query(client, '{job="logstore"} | logfmt | level="info" '
                             '| line_format "{{.caller}} {{.msg}}"')
    msgs = [line.split(" ", 1)[1] for line in info]
    assert "starting logstore" in msgs and "logstore is ready" in msgs
    assert "Starting granian (main PID: %d)" % server.proc.pid in msgs
    assert "stopping logstore" in msgs and "logstore stopped" in msgs
    assert "Granian shutdown completed, see ya!" in msgs
    assert any(m.startswith("created the Grafana API admin.") for m in msgs)


def test_a_json_server_writes_only_json_lines(make_server):
    # granian's lines in the serve process and in its worker, and logstore's: all JSON
    server = make_server({"server": {"log_format": "json"}})
    server.stop()
    assert server.proc.returncode == 0
    lines = [json.loads(line) for line in server.log_path.read_text().splitlines()]
    msgs = [obj["msg"] for obj in lines]
    assert "starting logstore" in msgs and "logstore stopped" in msgs
    assert "Granian shutdown completed, see ya!" in msgs
    assert all(list(obj)[:4] == ["level", "ts", "caller", "msg"] for obj in lines)
