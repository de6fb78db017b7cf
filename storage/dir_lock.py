"""The data directory's lock: one logstore process at a time owns a data directory.

SQLite would let a second server open the same file, and it would answer /ready 200; but two
processes each sealing, compacting and applying retention to one head, each truncating the
WAL when it stops, is never what the user meant: nearly always an old server is still running.
So whoever opens the store for writing (`serve`, `migrate`, an app's start-up) takes an
exclusive flock on `<data dir>/logstore.lock` for the life of the process, with its pid in the
file for the message a second one prints. The kernel drops the lock when the process dies, so
a killed server leaves nothing to clean up. `logstore backup` only reads and takes no lock.

Two details:
- `logstore serve` locks in the parent, before it starts granian, so it can refuse with exit
  code 1; the worker it starts then finds the lock held by its own parent and works under it
  (the parent names itself in LOCKED_BY_ENV for this).
- Within one process the lock is shared: an embedding program or the test suite may run two
  apps on one directory, which is as safe as one app (SQLite serialises their writes); the
  lock file is closed, and the lock dropped, when the last of them stops.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading

LOCK_FILENAME = "logstore.lock"
LOCKED_BY_ENV = "LOGSTORE_DATA_DIR_LOCKED_BY"


class DataDirInUse(Exception):
    def __init__(self, data_dir: str, pid: int | None):
        self.data_dir = data_dir
        self.pid = pid
        holder = f" (pid {pid})" if pid else ""
        super().__init__(f"data directory {data_dir} is in use by another logstore{holder}")


class _Held:
    __slots__ = ("fd", "users", "pid")

    def __init__(self, fd: int):
        self.fd = fd
        self.users = 1
        self.pid = os.getpid()  # a forked child inherits the table but not the ownership


_held: dict[str, _Held] = {}
_guard = threading.Lock()


class DataDirLock:
    def __init__(self, data_dir: str):
        self.data_dir = os.path.abspath(data_dir)
        self.path = os.path.join(self.data_dir, LOCK_FILENAME)
        self._mine = False  # False also when working under the parent's lock

    def acquire(self) -> None:
        """Raises DataDirInUse when another process holds the directory."""
        with _guard:
            held = _held.get(self.path)
            if held is not None and held.pid == os.getpid():
                held.users += 1
                self._mine = True
                return
            os.makedirs(self.data_dir, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                pid = _read_pid(fd)
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if pid is not None and _locked_for_me(pid):
                    return
                raise DataDirInUse(self.data_dir, pid) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            _held[self.path] = _Held(fd)
            self._mine = True

    def hold_for_workers(self) -> None:
        """`logstore serve`: acquire, and let the worker processes started from here work
        under this process's lock."""
        self.acquire()
        os.environ[LOCKED_BY_ENV] = str(os.getpid())

    def release(self) -> None:
        if not self._mine:
            return
        self._mine = False
        with _guard:
            held = _held.get(self.path)
            if held is None or held.pid != os.getpid():
                return
            held.users -= 1
            if held.users:
                return
            del _held[self.path]
            os.ftruncate(held.fd, 0)  # no pid of a process that has let go
            os.close(held.fd)


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _locked_for_me(holder: int) -> bool:
    parent = os.getppid()
    return holder == parent and os.environ.get(LOCKED_BY_ENV) == str(parent)
