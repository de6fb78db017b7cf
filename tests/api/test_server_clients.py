"""A real granian server, real client libraries, and a SIGKILL in the middle."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import logging_loki
import snappy

from proto import push_pb2
from tests.helpers import now_ns, stored


def _series(url: str, selector: str) -> list[dict]:
    r = httpx.get(url + "/logstore/api/v1/series", params={"match[]": selector})
    assert r.status_code == 200
    return r.json()["data"]


def test_python_logging_loki_handler_v1_and_legacy(server):
    logger = logging.getLogger("test-logging-loki")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    v1 = logging_loki.LokiHandler(url=server.url + "/logstore/api/v1/push",
                                  tags={"app": "handler-v1"}, version="1")
    v0 = logging_loki.LokiHandler(url=server.url + "/api/compat/push",
                                  tags={"app": "handler-v0"}, version="0")
    errors: list[BaseException] = []
    for handler in (v1, v0):
        handler.handleError = lambda record: errors.append(sys.exc_info()[1])  # noqa: B023
        logger.addHandler(handler)
    try:
        logger.error("disk %s is full", "/dev/sda1")
        logger.info("second line")
    finally:
        for handler in (v1, v0):
            logger.removeHandler(handler)
    assert errors == []
    lines = stored(str(server.data_dir / "logstore.db"))
    by_app: dict[str, list[tuple[str, dict]]] = {}
    for _, labels, _, line, md in lines:
        app = labels.split('app="')[1].split('"')[0]
        by_app.setdefault(app, []).append((line, md["detected_level"]))
    assert by_app == {
        "handler-v1": [("disk /dev/sda1 is full", "error"), ("second line", "info")],
        "handler-v0": [("disk /dev/sda1 is full", "error"), ("second line", "info")],
    }
    assert _series(server.url, '{app="handler-v1"}') == [
        {"app": "handler-v1", "logger": "test-logging-loki", "service_name": "handler-v1",
         "severity": "error"},
        {"app": "handler-v1", "logger": "test-logging-loki", "service_name": "handler-v1",
         "severity": "info"}]


def test_protobuf_snappy_client_built_from_the_proto(server):
    ts = now_ns()
    req = push_pb2.PushRequest()
    stream = req.streams.add(labels='{job="proto", host="h1"}')
    for i in range(3):
        entry = stream.entries.add(line=f"line {i}")
        entry.timestamp.seconds, entry.timestamp.nanos = divmod(ts + i, 10**9)
        entry.structuredMetadata.add(name="trace_id", value=f"t{i}")
    r = httpx.post(server.url + "/logstore/api/v1/push",
                   content=snappy.compress(req.SerializeToString()),
                   headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 204
    assert _series(server.url, '{job="proto"}') == [
        {"host": "h1", "job": "proto", "service_name": "proto"}]
    r = httpx.get(server.url + "/logstore/api/v1/label/host/values")
    assert r.json() == {"status": "success", "data": ["h1"]}


def test_acknowledged_lines_survive_sigkill(make_server, tmp_path):
    server = make_server()
    acknowledged: list[tuple[int, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def pusher(worker: int) -> None:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            i = 0
            while not stop.is_set():
                ts = now_ns()
                values = [[str(ts + j), f"w{worker} n{i} j{j}"] for j in range(50)]
                try:
                    r = client.post("/logstore/api/v1/push",
                                    json={"streams": [{"stream": {"job": f"w{worker}"},
                                                       "values": values}]})
                except httpx.HTTPError:
                    return  # the server died under us: this push was never acknowledged
                if r.status_code == 204:
                    with lock:
                        acknowledged.extend((int(t), line) for t, line in values)
                i += 1

    threads = [threading.Thread(target=pusher, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    # kill once a good number of pushes were acknowledged (a condition, not a duration)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            # and each of the four pushers had one acknowledged, which the labels check
            # below reads back (a starved pusher on a loaded machine had none)
            if len(acknowledged) >= 2000 and len({line.split()[0]
                                                  for _, line in acknowledged}) == 4:
                break
        time.sleep(0.01)
    server.kill()
    stop.set()
    for t in threads:
        t.join()
    with lock:
        expected = set(acknowledged)
    assert len(expected) >= 2000 and len({line.split()[0] for _, line in expected}) == 4

    restarted = make_server(data_dir=server.data_dir)
    rows = {(ts, line) for _, _, ts, line, _ in stored(str(restarted.data_dir / "logstore.db"))}
    assert expected <= rows
    r = httpx.get(restarted.url + "/logstore/api/v1/label/job/values",
                  params={"since": "1h"})
    assert r.json()["data"] == ["w0", "w1", "w2", "w3"]


def test_serve_command_flags_and_config_file(tmp_path):
    """`python -m app serve` honours --port/--data-dir over the file, and stops on SIGTERM."""
    from tests.conftest import LogstoreServer
    server = LogstoreServer(tmp_path / "flagged", {"server": {"log_level": "warn"}}).start()
    try:
        r = httpx.get(server.url + "/config", params={"mode": "diff"})
        assert r.status_code == 200
        assert "log_level: warn" in r.text
        assert f"http_listen_port: {server.port}" in r.text
        assert (server.data_dir / "logstore.db").exists()
    finally:
        # SIGTERM only (no SIGKILL fallback): the process must end by itself, cleanly
        os.killpg(server.proc.pid, signal.SIGTERM)
        try:
            code = server.proc.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            raise AssertionError("logstore serve did not stop on SIGTERM within 30 s")
    assert code == 0


def test_bad_config_file_names_the_key(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("limits_config:\n  max_line_sise: 10\n")
    root = Path(__file__).resolve().parent.parent.parent
    proc = subprocess.run([sys.executable, "-m", "app", "serve", "--config", str(cfg)],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "unknown configuration key 'limits_config.max_line_sise'" in proc.stderr
