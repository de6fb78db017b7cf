"""How fast the sealer reads and encodes a head of packs into blocks, in microseconds a row.

    .venv/bin/python bench/ingest.py --lines 300000 --realistic --no-sealing --keep DIR
    .venv/bin/python bench/seal.py --dir DIR [--runs 3]

Reads every group of the head that `bench/ingest.py --no-sealing` left (realistic pushes of
1,000 lines: a pack per stream and push) and encodes its block as the sealer's reader thread
does (storage/blocks/sealing.py `read_group`), over a read-only connection; nothing is
written. Prints the best of `--runs` for the packs sealed by their columns (what the sealer
does) and by their rows (every group as if its packs overlapped in time), and what the lines'
compression alone takes at the level blocks use. Nothing is written to bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage.blocks import codec as B, sealing  # noqa: E402
from storage.db import connect  # noqa: E402


def seal_all(conn, groups: list[sealing.Group]) -> int:
    rows = 0
    for g in groups:
        prepared = sealing.read_group(conn, g.stream_id, g.lo, g.hi, sealing.DEFAULT_MAX_ROWS)
        rows += prepared.rows if prepared is not None else 0
    return rows


def best_of(runs: int, fn) -> tuple[float, int]:
    best, rows = float("inf"), 0
    for _ in range(runs):
        t0 = time.perf_counter()
        rows = fn()
        best = min(best, time.perf_counter() - t0)
    return best, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="the --keep directory of bench/ingest.py")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    conn = connect(str(Path(args.dir) / "data" / "logstore.db"), readonly=True)
    groups = sealing.scan_head(conn, time.time_ns(), 3600 * 10**9, 0, everything=True).groups
    if not groups:
        raise SystemExit("the head is empty: make it with bench/ingest.py --no-sealing --keep")
    by_columns, rows = best_of(args.runs, lambda: seal_all(conn, groups))
    real = sealing.seal_packs
    sealing.seal_packs = lambda packs: None  # as if every group's packs overlapped
    try:
        by_rows, _ = best_of(args.runs, lambda: seal_all(conn, groups))
    finally:
        sealing.seal_packs = real
    bodies = []
    for g in groups:
        packs = sealing.stored_packs(conn, g.stream_id, g.lo, g.hi, sealing.DEFAULT_MAX_ROWS)
        bodies.append(b"".join(B._decompress(p.lines) for p in packs))
    compress, _ = best_of(args.runs,
                          lambda: sum(len(B._compress(b, lines=True)) for b in bodies))
    print(f"{len(groups)} groups, {rows:,} rows, {sum(map(len, bodies)) / 1e6:.1f} MB of lines")
    for name, seconds in (("sealed by columns", by_columns), ("sealed by rows", by_rows),
                          ("the lines' compression alone", compress)):
        print(f"{name:30s} {seconds * 1e6 / rows:5.2f} us a row ({rows / seconds:,.0f} rows/s)")


if __name__ == "__main__":
    main()
