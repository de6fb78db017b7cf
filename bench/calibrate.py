"""This sitting's speed against the one where Loki was measured for issues 22 and 25.

Loki is not installed here: the Loki figures of issues 22 and 25 were measured externally,
beside logstore as it was when each issue was filed, on a 2-core VM of this machine class
whose speed changes from one sitting to the next. So this runs that logstore (a git worktree
of the commit below) here, on the issue's own work, beside this checkout, alternated. The
old logstore's time here against its time in the issue is this sitting's factor; Loki's
figure scaled by the factor is what Loki would take in this sitting.

    .venv/bin/python bench/calibrate.py [--issue 22 25] [--runs 3] [--no-report]

Issue 22: pushes of 2,000, 5,000 and 20,000 new streams (bench/cardinality.py's shape, 500
streams a request), and of 100,000 by this checkout alone, against Loki's figure scaled by
each of their factors. The old logstore's push grew faster than its streams (a look at the
whole head per push), so its factor at 20,000 also measures how this sitting runs that
quadratic part; 2,000 and 5,000 are nearer plain per-stream work, as Loki's push is.

Issue 25: JSON ingest of the realistic set (bench/dataset.py, 1M lines, 4 clients, 1,000-line
batches), then, after /flush, its unwrap quantile and JSON filter
(bench/metrics.py's REALISTIC_QUERIES, median of 5). The issue's own set was 166.6 MB of
lines, bench/dataset.py's is 154 MB of the same kinds: its factor is the rougher one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import cardinality  # noqa: E402
import dataset  # noqa: E402
from ingest import encode, flush, free_port, push_all, start_server  # noqa: E402
from metrics import REALISTIC_QUERIES, realistic_medians  # noqa: E402
from report import machine, table, update_section  # noqa: E402

# The commit each issue's logstore figures were measured at (the parent of the first commit
# that answered the issue), and those figures with Loki's, from the issues' tables.
ISSUE_22_COMMIT = "fa3f05c^"
# streams: (logstore, Loki); the issue had no Loki figure at 2,000 streams
ISSUE_22_PUSH_MS = {2000: (260, None), 5000: (700, 340), 20000: (3450, 1980)}
# Loki's push of 100,000 (the issue gave no logstore figure there: it had grown
# quadratically, a look at the whole head per push)
ISSUE_22_LOKI_100K_MS = 7600
ISSUE_25_COMMIT = "0a44638^"
ISSUE_25 = {  # figure: (logstore, Loki), lines/s for ingest, ms for the queries
    "ingest": (81_314, 220_918),
    REALISTIC_QUERIES[0][0]: (1770, 324),
    REALISTIC_QUERIES[1][0]: (316, 266),
}


def worktree(commit: str, parent: Path) -> Path:
    """A detached worktree of `commit` that runs on this checkout's virtualenv."""
    tree = parent / commit.replace("^", "-parent")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree),
                    commit], check=True)
    (tree / ".venv").symlink_to(ROOT / ".venv")
    return tree


def drop_worktree(tree: Path) -> None:
    (tree / ".venv").unlink(missing_ok=True)
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                   check=False)


class Server:
    """`logstore serve` of a checkout on a fresh data directory, for a `with` block."""

    def __init__(self, tree: Path, extra: str = "") -> None:
        self.work = Path(tempfile.mkdtemp(prefix="logstore-calibrate-"))
        self.data = self.work / "data"
        self.data.mkdir()
        self.port = free_port()
        self.proc = start_server(self.data, self.port, extra, cwd=tree)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(60)
        shutil.rmtree(self.work)


def push_streams(tree: Path, n: int) -> float:
    """Seconds to push n new streams, 500 a request, one request after another."""
    bodies = cardinality.bodies(n, time.time_ns(), False)
    with Server(tree, cardinality.CONFIG) as server:
        began = time.perf_counter()
        for body in bodies:
            status, text = cardinality.request(server.port, "POST", "/logstore/api/v1/push",
                                               {}, body)
            if status != 204:
                raise SystemExit(f"{tree}: push answered {status} {text[:200]!r}")
        return time.perf_counter() - began


def realistic(tree: Path, bodies: list[bytes], end_ns: int, lines: int) -> dict[str, float]:
    """Ingest lines/s, then each realistic query's median ms after /flush."""
    out: dict[str, float] = {}
    with Server(tree) as server:
        out["ingest"] = lines / push_all(server.port, bodies, "application/json", 4)
        flush(server.port, server.data)
        out.update(realistic_medians(server.port, end_ns))
    return out


def spread(values: list[float]) -> str:
    return " / ".join(f"{x:,.0f}" for x in values)


def factor_of(issue_old: float, old: list[float], higher_is_better: bool) -> float:
    """This sitting's factor: how much faster it runs the old logstore than the issue did."""
    old_here = statistics.median(old)
    return old_here / issue_old if higher_is_better else issue_old / old_here


def against_loki(factor: float, loki: float | None, now: list[float],
                 higher_is_better: bool) -> list[object]:
    """The row's last columns: Loki's figure, it scaled by the factor, this checkout and
    its speed against that."""
    if loki is None:
        return ["", "", spread(now), ""]
    now_here = statistics.median(now)
    loki_here = loki * factor if higher_is_better else loki / factor
    ratio = now_here / loki_here if higher_is_better else loki_here / now_here
    return [f"{loki:,.0f}", f"{loki_here:,.0f}", spread(now), f"{ratio:.2f}x Loki's speed"]


def factor_row(name: str, issue_old: float, old: list[float], now: list[float],
               loki: float | None, higher_is_better: bool) -> list[object]:
    """A table row: the figures, this sitting's factor, Loki's figure scaled by it and this
    checkout against that."""
    factor = factor_of(issue_old, old, higher_is_better)
    unit = "lines/s" if higher_is_better else "ms"
    return [name, f"{issue_old:,.0f} {unit}", spread(old), f"{factor:.2f}",
            *against_loki(factor, loki, now, higher_is_better)]


def calibrate_22(parent: Path, runs: int) -> list[list[object]]:
    old_tree = worktree(ISSUE_22_COMMIT, parent)
    rows, factors = [], {}
    try:
        for n, (issue_old, loki) in ISSUE_22_PUSH_MS.items():
            old, now = [], []
            for _ in range(runs):  # alternated: the sitting drifts between runs
                old.append(1000 * push_streams(old_tree, n))
                now.append(1000 * push_streams(ROOT, n))
                print(f"push of {n:,} new streams: {ISSUE_22_COMMIT} {old[-1]:,.0f} ms, "
                      f"this checkout {now[-1]:,.0f} ms", flush=True)
            rows.append(factor_row(f"push of {n:,} new streams", issue_old, old, now, loki,
                                   False))
            factors[n] = factor_of(issue_old, old, False)
    finally:
        drop_worktree(old_tree)
    # 100,000 streams: this checkout only, against Loki's figure scaled by each factor above
    # (the old logstore cannot give one there)
    now = [1000 * push_streams(ROOT, 100_000) for _ in range(runs)]
    for n, factor in factors.items():
        rows.append([f"push of 100,000 new streams, by the factor of {n:,}", "", "",
                     f"{factor:.2f}",
                     *against_loki(factor, ISSUE_22_LOKI_100K_MS, now, False)])
    return rows


def calibrate_25(parent: Path, runs: int, lines: int) -> list[list[object]]:
    old_tree = worktree(ISSUE_25_COMMIT, parent)
    try:
        end_ns = time.time_ns()
        raw = list(dataset.batches(lines, 1000, end_ns, True))
        bodies, _ = encode(raw, "json")
        del raw
        old_runs, now_runs = [], []
        for _ in range(runs):
            old_runs.append(realistic(old_tree, bodies, end_ns, lines))
            now_runs.append(realistic(ROOT, bodies, end_ns, lines))
            print(f"realistic set: {ISSUE_25_COMMIT} {old_runs[-1]}, "
                  f"this checkout {now_runs[-1]}", flush=True)
    finally:
        drop_worktree(old_tree)
    return [factor_row(name, issue_old, [r[name] for r in old_runs],
                       [r[name] for r in now_runs], loki, name == "ingest")
            for name, (issue_old, loki) in ISSUE_25.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--issue", type=int, nargs="+", choices=[22, 25], default=[22, 25])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lines", type=int, default=1_000_000, help="issue 25's ingest")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="logstore-calibrate-trees-"))
    headers = ["figure", "old logstore in the issue", "old logstore here", "factor",
               "Loki in the issue", "Loki scaled here", "this checkout here", "against Loki"]
    try:
        for issue in args.issue:
            rows = (calibrate_22(parent, args.runs) if issue == 22
                    else calibrate_25(parent, args.runs, args.lines))
            text = table(headers, rows)
            print(text)
            if args.no_report:
                continue
            commit = ISSUE_22_COMMIT if issue == 22 else ISSUE_25_COMMIT
            update_section(
                f"Calibration for issue {issue} (bench/calibrate.py)",
                f"Command: `.venv/bin/python bench/calibrate.py --issue {issue} --runs "
                f"{args.runs}`\n\nMachine: {machine()}. The old logstore is `{commit}`, "
                "what the issue measured beside Loki; the factor is the old logstore's speed "
                "here over its speed in the issue (above 1: this sitting is faster), and "
                "Loki's figure (external, the issue's table) is scaled by it. Old and new "
                "run alternately.\n\n" + text)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
