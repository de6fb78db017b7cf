"""A query worker process holds what it evaluates with, not the server's services (issue 25:
the process tree's memory). asyncio alone, and the compactor and delete services that
brought it in, took 4 MB of each worker's own memory (bench/REPORT.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_query_worker_imports_no_event_loop_and_no_upkeep_service():
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys, services.read.query_worker; "
                               "print(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(done.stdout))
    assert "services.read.query_worker" in modules and "services.read.readers" in modules
    assert "asyncio" not in modules
    assert not modules & {"services.upkeep.compactor", "services.upkeep.deletes",
                          "services.upkeep.sealer", "services.runtime.base"}
