"""The process query workers are forked from: `python -m services.read.worker_zygote FD PID`.

A worker started as a fresh interpreter imported the engine, the SQLite bindings, msgspec and
numpy itself: 46 MB resident, 26 MB of it its own, in each of the two. This process imports
them once, freezes them out of the garbage collector (whose passes would write to every
object and so give each process its own copy of the pages) and forks each worker from that
state: the workers share those pages with it and with each other (PSS of two idle workers
70 MB -> 47 MB with this process included, bench/REPORT.md).

It stays single-threaded, so a fork copies no lock that another thread holds. The server
(services/read/query_pool.py) sends on the socket FD one byte and, as ancillary data, the
two pipe ends a worker reads its requests from and writes its answers to; this process
forks, and answers the worker's pid. The kernel reaps the workers (SIGCHLD ignored): the
server watches each through a pidfd and its answer pipe. This process exits when the
server's end of the socket closes, which the server does once its pool has all its workers
(a new zygote forks a replacement); a worker goes on without it and exits when its request
pipe closes. `ps` shows them as logstore-zygote and logstore-worker.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import Callable

PID = struct.Struct("<q")
FORK = b"F"
# what `ps -o comm`, top and /proc/PID/comm call them (Linux keeps 15 bytes)
ZYGOTE_NAME, WORKER_NAME = b"logstore-zygote", b"logstore-worker"
_PR_SET_NAME = 15


def _set_name(name: bytes) -> None:
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the name is only a help for people


def serve(sock: socket.socket) -> int:
    from services.read import query_worker

    _set_name(ZYGOTE_NAME)
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the server, which stops us
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    sock.sendall(PID.pack(os.getpid()))  # imported: ready to fork
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(sock, 1, 2)
        except OSError:
            return 0
        if message != FORK or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return 0  # the server went away (or sent what it never sends)
        pid = os.fork()
        if pid == 0:
            sock.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _set_name(WORKER_NAME)
            code = 1
            try:
                code = query_worker.main(os.fdopen(fds[0], "rb"), os.fdopen(fds[1], "wb"))
            except BaseException:  # noqa: BLE001 - said on stderr, the server sees the end
                import traceback
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        sock.sendall(PID.pack(pid))


def _read_pid(sock: socket.socket) -> int:
    data = b""
    while len(data) < PID.size:
        chunk = sock.recv(PID.size - len(data))
        if not chunk:
            raise ConnectionError("the query worker zygote exited")
        data += chunk
    return PID.unpack(data)[0]


class Zygote:
    """The server's end: the zygote is started for a fork when none runs, and ended once
    no fork is expected and the pool has all its workers. The workers share its pages with
    each other after it ends; kept, it would hold a process of them (47 MB of RSS) for
    nothing but a replacement, which a new zygote forks as well (bench/REPORT.md)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.pending_lock = threading.Lock()
        self.pending = 0  # forks asked for and not done

    def expect(self) -> None:
        """A fork will be asked for (said before its thread runs: the zygote is not ended
        between two forks of one pool that fills)."""
        with self.pending_lock:
            self.pending += 1

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        # the same imports as the server, whether it runs from a checkout, a wheel or a pyz
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        # numpy's OpenBLAS starts a thread pool when imported; the workers use no BLAS
        # kernel, and without it the zygote forks with its one thread only
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        try:
            self.proc = subprocess.Popen(
                # the server's pid, unused: it tells `ps` (and the tests) whose they are
                [sys.executable, "-m", "services.read.worker_zygote", str(theirs.fileno()),
                 str(os.getpid())],
                pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.sock = ours
        _read_pid(ours)  # it has imported what the workers run
        return ours

    def fork(self, requests_fd: int, answers_fd: int, enough: Callable[[], bool]) -> int:
        """A new worker's pid (after `expect()`); it reads `requests_fd` and writes
        `answers_fd` (the caller closes its copies). `enough()`: whether the pool is full."""
        with self.lock:
            try:
                return self._fork(requests_fd, answers_fd)
            finally:
                with self.pending_lock:
                    self.pending -= 1
                    last = self.pending == 0
                if last and enough():
                    self._close()

    def _fork(self, requests_fd: int, answers_fd: int) -> int:
        for attempt in (1, 2):
            sock = self.sock
            if sock is None or self.proc is None or self.proc.poll() is not None:
                self._close()
                sock = self._start()
            try:
                socket.send_fds(sock, [FORK], [requests_fd, answers_fd])
                return _read_pid(sock)
            except OSError:
                self._close()  # it ended meanwhile: once more with a new one
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.wait(2)  # its socket closed: it ends
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        with self.lock:
            self._close()


if __name__ == "__main__":
    sys.exit(serve(socket.socket(fileno=int(sys.argv[1]))))
