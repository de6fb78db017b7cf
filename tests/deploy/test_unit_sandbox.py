"""The sandbox tests/test_dist.py serves the pyz in refuses what deploy/logstore.service
refuses, so a pyz that serves there would serve under systemd's filters."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import needs

SANDBOX = Path(__file__).resolve().parent / "unit_sandbox.py"
PROBE = """
import mmap, os, socket
def attempt(what, f):
    try:
        f()
        print(what, "ok")
    except OSError as exc:
        print(what, exc.errno)
attempt("write+exec memory", lambda: mmap.mmap(-1, 4096, prot=7))
attempt("read+write memory", lambda: mmap.mmap(-1, 4096, prot=3))
attempt("netlink socket", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))
attempt("inet6 socket", lambda: socket.socket(socket.AF_INET6).close())
attempt("unix socket", lambda: socket.socket(socket.AF_UNIX).close())
attempt("chroot", lambda: os.chroot("/"))
"""


@needs(shutil.which("systemd-analyze") is not None,
       "systemd-analyze is not installed (Debian package systemd)")
def test_the_sandbox_refuses_what_the_unit_refuses():
    out = subprocess.run([sys.executable, str(SANDBOX), sys.executable, "-c", PROBE],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "write+exec memory 1",        # EPERM: MemoryDenyWriteExecute
        "read+write memory ok",
        "netlink socket 97",          # EAFNOSUPPORT: RestrictAddressFamilies
        "inet6 socket ok",
        "unix socket ok",
        "chroot 1",                   # EPERM: not in @system-service
    ]
