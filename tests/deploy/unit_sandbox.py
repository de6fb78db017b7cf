"""Run a command under the seccomp filters deploy/logstore.service asks systemd for:
SystemCallFilter (+ SystemCallErrorNumber), MemoryDenyWriteExecute and
RestrictAddressFamilies, built as systemd builds them, through libseccomp.

    python tests/deploy/unit_sandbox.py PROGRAM ARGS...

tests/test_dist.py serves the pyz this way, so a dependency that starts to need a forbidden
call or writable executable memory fails there instead of on a hardened host."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from unit_file import UNIT, unit_settings  # noqa: E402

ALLOW = 0x7FFF0000
CMP_EQ, CMP_MASKED_EQ = 4, 7
SHM_EXEC = 0o100000


def errno_action(code: int) -> int:
    return 0x00050000 | code


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def syscall_groups() -> dict[str, list[str]]:
    """systemd's own groups (`systemd-analyze syscall-filter`): names and nested @groups."""
    out: dict[str, list[str]] = {}
    group = None
    text = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True,
                          text=True, check=True).stdout
    for line in text.splitlines():
        if line.startswith("@"):
            group = out.setdefault(line.strip(), [])
        elif group is not None and line.strip() and not line.strip().startswith("#"):
            group.append(line.strip())
    return out


def expand(names: list[str], groups: dict[str, list[str]]) -> set[str]:
    out: set[str] = set()
    for name in names:
        out |= expand(groups[name], groups) if name.startswith("@") else {name}
    return out


class Filter:
    def __init__(self, lib: ctypes.CDLL, default: int) -> None:
        self.lib, self.ctx = lib, lib.seccomp_init(default)

    def add(self, action: int, syscall: str, *cmps: ArgCmp) -> bool:
        nr = self.lib.seccomp_syscall_resolve_name(syscall.encode())
        if nr < 0:
            return False  # not a call of this architecture
        array = (ArgCmp * len(cmps))(*cmps)
        rc = self.lib.seccomp_rule_add_array(self.ctx, action, nr, len(cmps), array)
        assert rc == 0, (syscall, rc)
        return True

    def load(self) -> None:
        assert self.lib.seccomp_load(self.ctx) == 0


def confine() -> None:
    s = unit_settings(UNIT.read_text())
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.c_void_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as NoNewPrivileges=yes
    # filters stack and the strictest answer wins: the restrictions first, while the
    # allow-list (which has no seccomp() in it) is not yet loaded
    limits = Filter(lib, ALLOW)
    if s.get("Service.MemoryDenyWriteExecute") == ["yes"]:
        wx = mmap.PROT_WRITE | mmap.PROT_EXEC
        limits.add(errno_action(errno.EPERM), "mmap", ArgCmp(2, CMP_MASKED_EQ, wx, wx))
        for call in ("mprotect", "pkey_mprotect"):
            limits.add(errno_action(errno.EPERM), call,
                       ArgCmp(2, CMP_MASKED_EQ, mmap.PROT_EXEC, mmap.PROT_EXEC))
        limits.add(errno_action(errno.EPERM), "shmat", ArgCmp(2, CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC))
    for families in s.get("Service.RestrictAddressFamilies", []):
        allowed = {getattr(socket, name) for name in families.split()}
        for family in set(range(46)) - allowed:
            limits.add(errno_action(errno.EAFNOSUPPORT), "socket", ArgCmp(0, CMP_EQ, family, 0))
    limits.load()
    (code,) = s.get("Service.SystemCallErrorNumber", ["EPERM"])
    calls = expand([w for line in s["Service.SystemCallFilter"] for w in line.split()],
                   syscall_groups())
    allow_list = Filter(lib, errno_action(getattr(errno, code)))
    assert sum(allow_list.add(ALLOW, call) for call in sorted(calls)) > 0
    allow_list.load()


if __name__ == "__main__":
    confine()
    os.execvp(sys.argv[1], sys.argv[1:])
