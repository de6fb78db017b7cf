"""Shared fixtures: an in-process app over a temporary database, and a real granian server."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
import yaml
from litestar.testing import TestClient

ROOT = Path(__file__).resolve().parent.parent
LOGHUB = ROOT.parent / "shared" / "data" / "loghub"
sys.path.insert(0, str(ROOT))

import config as config_module  # noqa: E402
from app import create_app  # noqa: E402


from tests import storage_matrix  # noqa: E402
from tests.storage_matrix import (CLICKHOUSE, STATES, Settler, clickhouse_store,  # noqa: E402
                                  open_client, storage_config)  # noqa: E402


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--clickhouse-url", default="",
        help="run the storage matrix's clickhouse state against this ClickHouse server "
             "(http(s)://host:8123) instead of the embedded engine; each test's data gets a "
             "database of its own there (t_<hash>), left for inspection")


def pytest_configure(config) -> None:
    storage_matrix.SERVER_URL = config.getoption("--clickhouse-url")

# The storage matrix (tests/storage_matrix.py): every test under these paths that uses a
# client or server fixture (or the `storage_state` fixture itself) runs once per state listed,
# with the data put in that state, and the state asserted, before each read. Everything else
# runs with the default storage settings and no settling. Each state runs where it adds
# coverage: the split state, where readers merge blocks with the head, on the query engines
# and on every read path of the deletion/retention matrix; head and sealed on every read suite.
ALL = STATES + (CLICKHOUSE,)
HEAD_SEALED = ("head", "sealed", CLICKHOUSE)
MATRIX: dict[str, tuple[str, ...]] = {
    "tests/query": ALL,
    "tests/metrics": ALL,
    "tests/logql": HEAD_SEALED,
    "tests/pipeline": HEAD_SEALED,
    "tests/tail": HEAD_SEALED,
    "tests/legacy": HEAD_SEALED,
    "tests/multitenant": HEAD_SEALED,
    "tests/otlp": HEAD_SEALED,
    "tests/api/test_loki_paths.py": HEAD_SEALED,
    "tests/read/test_metadata_api.py": HEAD_SEALED,
    "tests/read/test_index_volume.py": HEAD_SEALED,
    "tests/patterns/test_patterns.py": HEAD_SEALED,
    "tests/patterns/test_follower.py": ("head", CLICKHOUSE),
    "tests/read/test_drilldown.py": HEAD_SEALED,
    "tests/read/test_read_paths_deletion.py": ALL,
}


def matrix_states(path: Path) -> tuple[str, ...]:
    rel = path.resolve().relative_to(ROOT).as_posix()
    for prefix, states in MATRIX.items():
        if rel == prefix or rel.startswith(prefix + "/"):
            return states
    return ()


def pytest_generate_tests(metafunc) -> None:
    if "storage_state" not in metafunc.fixturenames:
        return
    states = matrix_states(metafunc.definition.path)
    if metafunc.definition.get_closest_marker("sqlite_only"):
        states = tuple(s for s in states if s != CLICKHOUSE)
    if states and not metafunc.definition.get_closest_marker("seals_itself"):
        metafunc.parametrize("storage_state", states, indirect=True, scope="module")


def pytest_collection_modifyitems(config, items) -> None:
    """A test whose server runs query workers (marked `query_workers`, also through a
    fixture's param) is not in the clickhouse state: workers read the SQLite file, and
    storage.backend: clickhouse runs without them. Deselected, not skipped: it does not
    apply there."""
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("storage_state") == CLICKHOUSE and item.get_closest_marker("query_workers"):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    # `make test` hands modules to its workers in this order (--dist loadscope): the
    # longest start first, so the workers finish together instead of one ending alone on a
    # long module collected last
    items.sort(key=lambda item: LONG_MODULES.get(item.path.relative_to(ROOT).as_posix(), 0),
               reverse=True)


# seconds of the longest modules (pytest --durations=0, three workers), longest first
LONG_MODULES = {
    "tests/api/test_openapi.py": 66, "tests/otlp/test_otlp.py": 47,
    "tests/patterns/test_patterns.py": 46, "tests/multitenant/test_multitenant.py": 39,
    "tests/storage/test_sealing.py": 24, "tests/read/test_index_volume.py": 24,
    "tests/api/test_loki_paths.py": 22, "tests/storage/test_shared_postgres.py": 19,
    "tests/read/test_read_paths_deletion.py": 19, "tests/test_dist.py": 17,
    "tests/query/test_dense_windows.py": 17, "tests/shared/test_two_nodes.py": 15,
    "tests/storage/test_blocks.py": 15,
    # tests/grafana stays where it is: its tests are ordered by the store they share
}


# What the suite needs from the machine. Outside CI a missing one skips the tests that need it
# (a clone elsewhere); under CI=true it fails the run at its start, so a daemon or the corpus
# cannot silently vanish from CI and leave it green.
NEEDS = {
    "prometheus-alertmanager": "apt-get install -y prometheus-alertmanager",
    "prometheus": "apt-get install -y prometheus",
    "make": "apt-get install -y make",
    "systemd-analyze": "apt-get install -y systemd",  # verifies deploy/logstore.service
    "chromium": "apt-get install -y chromium",  # tests/ui drive the web page in it
    "chromedriver": "apt-get install -y chromium-driver",
}


def missing_needs() -> list[str]:
    import glob
    import shutil

    out = [f"{exe} (not on PATH: {how})" for exe, how in NEEDS.items() if not shutil.which(exe)]
    # the shared state of the clickhouse state and of several nodes (tests/postgres.py); the
    # Debian package keeps its binaries off PATH
    if not shutil.which("pg_ctl") and not glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"):
        out.append("PostgreSQL (pg_ctl not found: apt-get install -y postgresql)")
    if not LOGHUB.is_dir():
        out.append(f"the loghub corpus ({LOGHUB}: ../shared beside the checkout)")
    from services.ingest.decode import pushproto
    from services.ingest.levels import linescan
    from storage.blocks.codec import _bloom

    for built, name in ((linescan, "services/ingest/_linescan.c"),
                        (pushproto, "services/ingest/_pushproto.c"),
                        (_bloom, "storage/blocks/_bloom.c")):
        if built is None:
            out.append(f"{name}, not built (pip install -e . builds it; it needs gcc, "
                       "Python's headers and zlib1g-dev)")
    return out


ON_CI = os.environ.get("CI", "").lower() in ("true", "1")


def absent(reason: str) -> NoReturn:
    """What a test needs is not on this machine: it skips on a developer's machine and
    fails under CI=true (where the run's start has already stopped for it: missing_needs)."""
    if ON_CI:
        pytest.fail(f"CI=true, and {reason}")
    pytest.skip(reason)


def needs(present: bool, reason: str) -> pytest.MarkDecorator:
    """The mark for tests that need something the machine may lack: a skip outside CI;
    under CI=true no skip, the tests run and fail without it."""
    return pytest.mark.skipif(not present and not ON_CI, reason=reason)


def pytest_sessionstart(session) -> None:
    if not ON_CI:
        return
    missing = missing_needs()
    if missing:
        pytest.exit("CI=true but the tests need what this machine lacks:\n  "
                    + "\n  ".join(missing), returncode=3)


@pytest.fixture(scope="module")
def storage_state(request) -> str | None:
    """The storage state the test's data is read in (None outside the matrix)."""
    return getattr(request, "param", None)


def _with_test_storage(extra: dict | None, state: str | None = None,
                       data_dir: Path | None = None, own_process: bool = False) -> dict:
    extra = dict(extra or {})
    if state is not None:
        # the test's own storage settings win: a test that configures sealing means it
        extra["storage"] = {**storage_config(state, data_dir, own_process),
                            **extra.get("storage", {})}
    return extra


def make_config(data_dir: Path, extra: dict | None = None,
                state: str | None = None) -> config_module.Config:
    data: dict[str, Any] = {"common": {"path_prefix": str(data_dir)}}
    for section, values in _with_test_storage(extra, state, data_dir).items():
        if isinstance(values, dict):
            data.setdefault(section, {}).update(values)
        else:
            data[section] = values
    return config_module.config_from_dict(data)


def matrix_client(data_dir: Path, extra: dict | None, state: str | None):
    """A client over a fresh app whose reads find the data in `state`, to be entered with
    `with` (it starts the app's lifespan)."""
    return open_client(create_app(make_config(data_dir, extra, state)), state)


@contextlib.contextmanager
def module_client(tmp_path_factory, state: str | None, extra: dict | None = None):
    """One started client for all of a module's tests (a module-scoped fixture yields it),
    for tests that only read what the module stored once, or whose requests are refused:
    starting an app costs about a quarter of a second, which an app per test multiplied."""
    with matrix_client(tmp_path_factory.mktemp("module") / "data", extra, state) as client:
        yield client


@contextlib.contextmanager
def engine_reader(client: Any):
    """A factory of the engine's storage reader (`logql.reading.Reader`) over what `client`
    stored, settled into its storage state: a read-only SQLite connection of its own, or
    the app's ClickHouse store (the client must stay open while it is used)."""
    from storage.db import connect
    from storage.reader import LogReader

    client.settler.settle()
    store = clickhouse_store(client.app)
    if store is not None:
        yield lambda: store.reader(None, None)
        return
    conn = connect(client.app.state.services.db.path, readonly=True)
    try:
        yield lambda: LogReader(conn)
    finally:
        conn.close()


@pytest.fixture
def make_client(tmp_path: Path, storage_state):
    """Factory: a Litestar TestClient over a fresh data directory (optionally reused); in the
    storage matrix its reads find the data in the test's storage state."""
    opened: list[TestClient] = []

    def factory(extra: dict | None = None, data_dir: Path | None = None) -> TestClient:
        client = matrix_client(data_dir or tmp_path / "data", extra, storage_state)
        client.__enter__()
        opened.append(client)
        return client

    yield factory
    for client in reversed(opened):
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client) -> TestClient:
    return make_client()


@pytest.fixture
def db(tmp_path: Path):
    """An opened Database (the SQLite file and its writer thread) in a fresh directory,
    without a server."""
    from storage.db import Database

    database = Database(str(tmp_path / "d"))
    database.open()
    yield database
    database.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LogstoreServer:
    """`logstore serve` in a subprocess on a free loopback port."""

    def __init__(self, data_dir: Path, extra: dict | None = None, state: str | None = None):
        self.data_dir = data_dir
        self.extra = extra or {}
        self.config_path = data_dir.parent / f"{data_dir.name}-config.yaml"
        cfg = {"common": {"path_prefix": str(data_dir)}}
        for section, values in _with_test_storage(extra, state, data_dir, True).items():
            if isinstance(values, dict):
                cfg.setdefault(section, {}).update(values)
            else:
                cfg[section] = values
        self.config_path.write_text(yaml.safe_dump(cfg))
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"
        # a server is read over its own HTTP clients, so tests call settle() themselves
        # after pushing (the pattern miner's gate is not reachable from here: a split state
        # of a server with the pattern ingester on is not supported)
        self.settler = Settler(state, lambda: data_dir / "logstore.db", self._flush)
        self.settler.dirty = True

    def _flush(self) -> None:
        token = self.extra.get("server", {}).get("admin_token")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = httpx.post(self.url + self.prefix + "/flush", headers=headers, timeout=60)
        assert r.status_code == 204, r.text

    def settle(self) -> None:
        """Put what was pushed so far into the promised storage state, and assert it."""
        self.settler.dirty = True
        self.settler.settle()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def prefix(self) -> str:
        """server.http_path_prefix as configured (every route answers under it)."""
        return self.extra.get("server", {}).get("http_path_prefix", "").rstrip("/")

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
                if httpx.get(self.url + self.prefix + "/ready",
                             timeout=1).status_code == 200:
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
def make_server(tmp_path: Path, request):
    """Factory: a real server. It is in the storage matrix only for a test that asks for
    `storage_state` itself, since such a test must call `server.settle()` before reading
    (its HTTP clients do not go through a settling client)."""
    started: list[LogstoreServer] = []
    callspec = getattr(request.node, "callspec", None)
    storage_state = callspec.params.get("storage_state") if callspec else None

    def factory(extra: dict | None = None, data_dir: Path | None = None) -> LogstoreServer:
        server = LogstoreServer(data_dir or tmp_path / "data", extra, storage_state).start()
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
        absent(f"loghub corpus not available at {LOGHUB}")
    path = LOGHUB / system / f"{system}_2k{suffix}"
    if not path.exists():
        pytest.fail(f"loghub corpus present but {path} is missing")
    return path


def loghub_lines(system: str) -> list[str]:
    return loghub_file(system).read_text(encoding="utf-8", errors="replace").splitlines()


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL for this test process (tests/postgres.py)."""
    from tests.postgres import start_server

    server = start_server()
    yield server
    server.close()


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """A fresh, empty database on the real PostgreSQL."""
    return postgres_server.fresh_database()


@pytest.fixture(params=["sqlite", "postgres"])
def state_store(request):
    """Where a node's state lives: the SQLite file (an opened Database), or the shared
    PostgreSQL of a cluster, which runs the same statements."""
    if request.param == "sqlite":
        yield request.getfixturevalue("db")
        return
    from storage.shared.postgres import PostgresState

    state = PostgresState(request.getfixturevalue("postgres_url"))
    state.open()
    yield state
    state.close()
