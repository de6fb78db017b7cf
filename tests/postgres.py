"""A real PostgreSQL for the shared-state tests (Debian package `postgresql`; .ci/run installs
it, elsewhere the tests that need it skip and say why): one server per test process on a
loopback port, a fresh database per test.

PostgreSQL refuses to run as root; as root the server runs as the `postgres` user the
package creates, in a directory of its own under /tmp."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import time

from tests.conftest import absent, free_port


def binaries() -> str | None:
    """The directory of pg_ctl and initdb (the Debian package keeps them off PATH)."""
    found = shutil.which("pg_ctl")
    if found:
        return os.path.dirname(os.path.realpath(found))
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(dirs[-1]) if dirs else None


class Server:
    def __init__(self) -> None:
        bindir = binaries()
        if bindir is None:
            absent("PostgreSQL is not installed (apt-get install -y postgresql)")
        self.bindir = bindir
        self.dir = tempfile.mkdtemp(prefix="logstore-pg-")
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            os.chmod(self.dir, 0o700)
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.dir, "data")
        self.names = itertools.count()

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self.as_user, *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def start(self) -> None:
        if not os.path.exists(self.data):
            self._run(os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", "postgres",
                      "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
        options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                   f"-c unix_socket_directories={self.dir} -c fsync=off "
                   "-c max_connections=200")
        self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-w", "-t", "60",
                  "-o", options, "-l", os.path.join(self.dir, "log"), "start")

    def stop(self) -> None:
        self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m", "immediate",
                  "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def fresh_database(self) -> str:
        """The URL of a new, empty database."""
        import psycopg

        name = f"t{os.getpid()}_{next(self.names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def close(self) -> None:
        try:
            if os.path.exists(os.path.join(self.data, "postmaster.pid")):  # still running
                self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def start_server() -> Server:
    server = Server()
    deadline = time.monotonic() + 5
    while True:
        try:
            server.start()
            return server
        except RuntimeError:
            # the free port was taken between choosing and binding: try another
            if time.monotonic() > deadline:
                raise
            server.port = free_port()
