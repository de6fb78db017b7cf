"""A process's memory (issue 25: the process tree's memory). A query worker hands memory
back after a job that held much of it: glibc keeps what a process freed for reuse;
`memory.grew_since_trim` tells a worker when its RSS is LARGE_BYTES above what the last
trim left, and the trim gives it back. And the server holds no module it never calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from services.runtime import memory
from tests.conftest import absent

ROOT = Path(__file__).resolve().parents[2]
# In a process of its own, as a query worker is: a test process that ran other tests has free
# pieces of its heap that the allocations below would reuse.
SCRIPT = """
import json
from services.runtime import memory
memory.limit_arenas()
out = {"first": memory.grew_since_trim()}
before = memory.resident_bytes()
# 48 MB in pieces under glibc's mmap threshold, each followed by a small piece from malloc
# (over pymalloc's 512 bytes) that stays: the freed pieces cannot merge into the heap's top,
# which glibc shrinks by itself; only a trim returns the pages in between
big, pins = [], []
for _ in range(768):
    big.append(bytearray(64 << 10))
    pins.append(bytearray(1024))
del big
out["freed_held"] = memory.resident_bytes() - before
out["grew"] = memory.grew_since_trim()
memory.trim()
out["after_trim"] = memory.resident_bytes() - before
out["grew_after_trim"] = memory.grew_since_trim()
print(json.dumps(out))
"""


def test_memory_freed_in_the_middle_of_the_heap_is_trimmed_when_it_grew():
    if memory._glibc() is None:
        absent("the C library has no malloc_trim (glibc's)")
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["first"] is False  # the first look only notes what the process holds
    assert out["freed_held"] >= 4 * memory.LARGE_BYTES  # the state: freed, still resident
    assert out["grew"] is True
    assert out["after_trim"] < memory.LARGE_BYTES
    assert out["grew_after_trim"] is False


SERVER_MODULES = """
import json, sys
import app
app.create_app()
extras = ("rich", "pygments", "click")
held = sorted(m for m in sys.modules if m.split(".")[0] in extras and sys.modules[m])
import rich  # still installed for whoever asks later
print(json.dumps({"held": held, "structlog": "structlog" in sys.modules,
                  "httpx": "httpx" in sys.modules, "rich_later": rich.__name__}))
"""


def test_the_server_leaves_out_what_structlog_and_httpx_import_for_nothing(tmp_path):
    """Issue 25's memory: structlog imports rich and pygments for its coloured console
    renderer and httpx imports click and rich for its command line, when installed (litestar
    and granian install them): about 6 MB in each process that logs, which logstore never
    spends on those (`memory.importing_without`)."""
    done = subprocess.run([sys.executable, "-c", SERVER_MODULES], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LOGSTORE_DATA_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got == {"held": [], "structlog": True, "httpx": True, "rich_later": "rich"}
