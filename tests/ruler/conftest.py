"""Real receivers for the ruler's tests: Prometheus Alertmanager and Prometheus (Debian
packages `prometheus-alertmanager` and `prometheus`; .ci/run installs them, elsewhere the
tests that need them skip and say why), and an in-process HTTP receiver that can be told to
fail or stall, for what a real one cannot be made to do."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import snappy

from proto import remote_pb2
from tests.conftest import absent, free_port


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/-/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)  # polling a starting process for readiness
    raise RuntimeError(f"{url} not ready: {log.read_text()[-2000:]}")


class Binary:
    """A Debian-packaged daemon on a loopback port, restartable on the same port."""

    def __init__(self, args: list[str], port: int, log: Path):
        self.args, self.port, self.log = args, port, log
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Binary":
        self.proc = subprocess.Popen(self.args, stdout=open(self.log, "ab"),
                                     stderr=subprocess.STDOUT)
        _wait_ready(self.url, self.proc, self.log)
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _need(binary: str, package: str) -> str:
    path = shutil.which(binary)
    if path is None:
        absent(f"{binary} not installed (apt-get install -y {package}; .ci/run does)")
    return path


@pytest.fixture
def alertmanager(tmp_path):
    exe = _need("prometheus-alertmanager", "prometheus-alertmanager")
    cfg = tmp_path / "alertmanager.yml"
    # a receiver that delivers nowhere: the test reads what arrived from Alertmanager's API
    cfg.write_text("route:\n  receiver: nowhere\n  group_wait: 1s\nreceivers:\n"
                   "  - name: nowhere\n")
    port = free_port()
    am = Binary([exe, f"--config.file={cfg}", f"--storage.path={tmp_path / 'am-data'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                 "--log.level=warn"], port, tmp_path / "alertmanager.log").start()
    yield am
    am.stop()


@pytest.fixture
def prometheus(tmp_path):
    exe = _need("prometheus", "prometheus")
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1h\n")
    port = free_port()
    prom = Binary([exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                   f"--web.listen-address=127.0.0.1:{port}", "--web.enable-remote-write-receiver",
                   "--log.level=warn"], port, tmp_path / "prometheus.log").start()
    yield prom
    prom.stop()


class Receiver:
    """Records every request; answers `status`. While `hold()` is in force it takes each
    request and answers nothing until `release()`: a hanging Alertmanager, for as long as the
    test needs it and no longer (no delay to outlast)."""

    def __init__(self):
        self.requests: list[tuple[str, dict, bytes]] = []
        self.status = 200
        self._held: threading.Event | None = None
        self.holding = threading.Semaphore(0)  # one release per request taken and held
        self.arrived = threading.Condition()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                held = owner._held
                if held is not None:
                    owner.holding.release()
                    held.wait(60)
                with owner.arrived:
                    owner.requests.append((self.path, dict(self.headers), body))
                    owner.arrived.notify_all()
                self.send_response(owner.status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def hold(self) -> None:
        self._held = threading.Event()

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, count: int, timeout: float = 20) -> None:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"{len(self.requests)} requests arrived, want {count}")

    def samples(self) -> list[tuple[dict[str, str], int, float]]:
        out = []
        for _, _, body in self.requests:
            req = remote_pb2.WriteRequest()
            req.ParseFromString(snappy.decompress(body))
            for ts in req.timeseries:
                labels = {lb.name: lb.value for lb in ts.labels}
                out += [(labels, s.timestamp, s.value) for s in ts.samples]
        return out

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()
