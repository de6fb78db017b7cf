"""Shared fixtures: an in-process app over a temporary database, and a real granian server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from litestar.testing import TestClient

ROOT = Path(__file__).resolve().parent.parent
LOGHUB = ROOT.parent / "shared" / "data" / "loghub"
sys.path.insert(0, str(ROOT))

import config as config_module  # noqa: E402
from app import create_app  # noqa: E402


# LOGSTORE_TEST_SEALING=eager runs the suite with the sealer moving every line into small
# blocks as soon as its minute is over, while the tests push and query: every answer must be
# the same as with the lines in the head (`make test` runs the query tests both ways).
EAGER_SEALING = {"block_window": "1m", "seal_grace_period": "0s", "block_max_rows": 50}


def _with_test_storage(extra: dict | None) -> dict:
    extra = dict(extra or {})
    if os.environ.get("LOGSTORE_TEST_SEALING") == "eager":
        extra["storage"] = {**EAGER_SEALING, **extra.get("storage", {})}
    return extra


def make_config(data_dir: Path, extra: dict | None = None) -> config_module.Config:
    data: dict[str, Any] = {"common": {"path_prefix": str(data_dir)}}
    for section, values in _with_test_storage(extra).items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    return config_module.config_from_dict(data)


@pytest.fixture
def make_client(tmp_path: Path):
    """Factory: a Litestar TestClient over a fresh data directory (optionally reused)."""
    opened: list[TestClient] = []

    def factory(extra: dict | None = None, data_dir: Path | None = None) -> TestClient:
        cfg = make_config(data_dir or tmp_path / "data", extra)
        client = TestClient(create_app(cfg))
        client.__enter__()
        opened.append(client)
        return client

    yield factory
    for client in reversed(opened):
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client) -> TestClient:
    return make_client()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LogstoreServer:
    """`logstore serve` in a subprocess on a free loopback port."""

    def __init__(self, data_dir: Path, extra: dict | None = None):
        self.data_dir = data_dir
        self.config_path = data_dir.parent / f"{data_dir.name}-config.yaml"
        cfg = {"common": {"path_prefix": str(data_dir)}}
        for section, values in _with_test_storage(extra).items():
            if isinstance(values, dict):
                cfg.setdefault(section, {}).update(values)
            else:
                cfg[section] = values
        self.config_path.write_text(yaml.safe_dump(cfg))
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> "LogstoreServer":
        self.port = free_port()
        env = dict(os.environ)
        env.pop("LOGSTORE_CONFIG", None)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--config", str(self.config_path),
             "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)  # polling for readiness, not synchronising on elapsed time
        raise RuntimeError(f"server not ready: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown hooks run."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def make_server(tmp_path: Path):
    started: list[LogstoreServer] = []

    def factory(extra: dict | None = None, data_dir: Path | None = None) -> LogstoreServer:
        server = LogstoreServer(data_dir or tmp_path / "data", extra).start()
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def server(make_server) -> LogstoreServer:
    return make_server()


def loghub_file(system: str, suffix: str = ".log") -> Path:
    """A loghub sample file. Skips when ../shared/data/loghub is absent (a clone elsewhere);
    fails when the corpus is there but the file is not, so a data-driven test never skips
    silently where the data should be."""
    if not LOGHUB.is_dir():
        pytest.skip(f"loghub corpus not available at {LOGHUB}")
    path = LOGHUB / system / f"{system}_2k{suffix}"
    if not path.exists():
        pytest.fail(f"loghub corpus present but {path} is missing")
    return path


def loghub_lines(system: str) -> list[str]:
    return loghub_file(system).read_text(encoding="utf-8", errors="replace").splitlines()
