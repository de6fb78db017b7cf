"""Keeping the process's resident memory close to what it uses (glibc only; a no-op elsewhere).

Every thread that allocates gets its own glibc malloc arena, and memory freed in an arena is
kept for reuse: after the sealer has worked through a large head, or a query has held a big
result, the worker kept 150 MB it no longer used (bench/REPORT.md, "Issue 11"). Two arenas
are enough for one writer, a few readers and the event loop, and `malloc_trim` hands the
free tops of the heap back after large pieces of work.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from contextlib import contextmanager
from typing import Iterator

log = logging.getLogger("logstore.memory")

_M_ARENA_MAX = -8
_libc = None


def _glibc():
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            lib.malloc_trim  # noqa: B018 - raises AttributeError where there is none
            lib.mallopt
            _libc = lib
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


def limit_arenas(count: int = 2) -> None:
    lib = _glibc()
    if lib is not None:
        lib.mallopt(_M_ARENA_MAX, count)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_resident_after_trim = 0  # bytes, as resident_bytes() read it after the last trim


def resident_bytes() -> int:
    """The process's RSS (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def trim() -> None:
    global _resident_after_trim
    lib = _glibc()
    if lib is not None:
        lib.malloc_trim(0)
        _resident_after_trim = resident_bytes()


def grew_since_trim() -> bool:
    """Whether the RSS is LARGE_BYTES or more above what the last trim left: work that held
    much and freed it, which glibc keeps unless trimmed."""
    global _resident_after_trim
    if _glibc() is None:
        return False
    now = resident_bytes()
    if not _resident_after_trim:
        _resident_after_trim = now  # the first look: what the process holds once started
        return False
    return now - _resident_after_trim >= LARGE_BYTES


# Work that allocated this much is followed by a trim: a 100 MB push body or a big query
# result otherwise stays resident after it is freed.
LARGE_BYTES = 8 << 20
# a read that ran this long (seconds) usually held large batches and results: trimmed after
LONG_READ_SECONDS = 0.5
# tracked allocations between young collections (the server's and the query workers')
GC_GEN0_THRESHOLD = 20_000
_trim_pending = False


def trim_soon() -> None:
    """malloc_trim on a worker thread, at most one at a time; never waits."""
    global _trim_pending
    if _trim_pending or _glibc() is None:
        return
    _trim_pending = True

    def run() -> None:
        global _trim_pending
        try:
            trim()
        finally:
            _trim_pending = False

    import threading
    threading.Thread(target=run, name="logstore-trim", daemon=True).start()


# Installed beside logstore (litestar brings rich and pygments, granian click) and imported
# by structlog and httpx when present, for what logstore never uses: structlog's coloured
# console renderer, httpx's command line. Left out of those imports, each process that logs
# or talks to Alertmanager holds about 6 MB less (bench/REPORT.md).
UNUSED_EXTRAS = ("rich", "pygments", "click")


@contextmanager
def importing_without(names: tuple[str, ...] = UNUSED_EXTRAS) -> Iterator[None]:
    """Imports in this block find `names` not installed (unless something imported them
    already); imports after it find them again."""
    blocked = [name for name in names if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
