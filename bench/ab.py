"""One query against two checkouts of logstore at once, alternated request by request: a
change's before and after on a shared machine, where runs one after the other drift by more
than the change.

    .venv/bin/python bench/ingest.py --lines 1000000 --realistic --keep DIR
    git worktree add /tmp/before HEAD~1
    .venv/bin/python bench/ab.py --data DIR /tmp/before . [--runs 40] \
        [--query '{job="api"} | json | status >= 500'] [--limit 1000 | --step 300]

Each checkout's server runs on its own copy of DIR's data directory (a data directory takes
one server), with this checkout's virtualenv. Prints the median, first quartile and best
wall time of each; writes nothing to bench/REPORT.md (a before and after belongs to the
section of the change it measures).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from background import data_range  # noqa: E402
from ingest import free_port, start_server  # noqa: E402
from metrics import run_query  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="directory given to ingest.py --keep")
    ap.add_argument("trees", nargs=2, help="the two checkouts, before and after")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--query", default='{job="api"} | json | status >= 500')
    ap.add_argument("--limit", type=int, default=1000, help="a log query's limit")
    ap.add_argument("--step", type=int, help="seconds: a metric query_range at this step")
    args = ap.parse_args()
    source = Path(args.data) / "data"
    start, end = data_range(source / "logstore.db")
    end -= 1  # the newest entry itself is the end
    step = args.step if args.step else f"limit {args.limit}"
    work = Path(tempfile.mkdtemp(prefix="logstore-ab-"))
    servers = []
    procs = []
    try:
        for i, tree in enumerate(args.trees):
            data = work / str(i) / "data"
            shutil.copytree(source, data, ignore=shutil.ignore_patterns("*.lock"))
            servers.append((tree, free_port(), data))
        for tree, port, data in servers:
            procs.append(start_server(data, port, cwd=Path(tree).resolve()))
        times: list[list[float]] = [[] for _ in servers]
        for _, port, _ in servers:
            run_query(port, args.query, start, end, step)  # warm-up
        for _ in range(args.runs):
            for i, (_, port, _) in enumerate(servers):
                times[i].append(run_query(port, args.query, start, end, step)[0])
        for (tree, _, _), took in zip(servers, times):
            took.sort()
            print(f"{tree}: median {statistics.median(took) * 1000:.1f} ms, "
                  f"first quartile {took[len(took) // 4] * 1000:.1f} ms, "
                  f"best {took[0] * 1000:.1f} ms ({args.runs} runs)")
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and its query workers
            proc.wait(60)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
