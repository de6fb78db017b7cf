"""A query worker hands memory back after a job that held much of it (issue 25: the process
tree's memory). glibc keeps what a process freed for reuse; `memory.grew_since_trim` tells
a worker when its RSS is LARGE_BYTES above what the last trim left, and the trim gives it
back."""

from __future__ import annotations

import json
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
