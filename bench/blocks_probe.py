"""Issue 11 probe: how small could sealed, compressed per-stream blocks be on the bench set?

    .venv/bin/python bench/ingest.py --lines 1000000 --keep /tmp/qbench --no-report
    .venv/bin/python bench/blocks_probe.py --db /tmp/qbench/data/logstore.db

Reads the stored entries, cuts them per stream into windows, encodes each block as columns
(timestamp deltas as varints, lines separated by newlines, metadata texts) and compresses it
with zstd at a few levels and window sizes; also sizes a trigram bloom filter per block at a
1% false-positive rate. Prints bytes per byte of log text; nothing is written.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
import time
from collections import defaultdict

import zstandard

NS = 10**9


def varints(values: list[int]) -> bytes:
    out = bytearray()
    for v in values:
        v = (v << 1) ^ (v >> 63)  # zigzag: deltas are never negative here, but be safe
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return bytes(out)


def encode(rows: list[tuple[int, str, str | None]]) -> tuple[bytes, bytes, bytes]:
    ts = [r[0] for r in rows]
    deltas = [ts[0]] + [b - a for a, b in zip(ts, ts[1:])]
    lines = "\n".join(r[1] for r in rows).encode("utf-8", "surrogatepass")
    meta = "\n".join(r[2] or "" for r in rows).encode()
    return varints(deltas), lines, meta


def bloom_bytes(distinct: int, fpr: float = 0.01) -> int:
    bits = -distinct * math.log(fpr) / (math.log(2) ** 2)
    return math.ceil(bits / 8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    args = ap.parse_args()
    conn = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    by_stream: dict[int, list] = defaultdict(list)
    raw = 0
    for sid, ts, line, md in conn.execute(
            "SELECT stream_id, ts, line, metadata FROM entries ORDER BY stream_id, ts"):
        by_stream[sid].append((ts, line, md))
        raw += len(line.encode("utf-8", "surrogatepass"))
    print(f"{sum(map(len, by_stream.values())):,} entries, {raw:,} bytes of log text, "
          f"{len(by_stream)} streams", file=sys.stderr)
    rows_out = []
    for window_s in (900, 3600, 6 * 3600):
        blocks = []
        for sid, rows in by_stream.items():
            cur: list = []
            for r in rows:
                if cur and r[0] // (window_s * NS) != cur[0][0] // (window_s * NS):
                    blocks.append(cur)
                    cur = []
                cur.append(r)
            if cur:
                blocks.append(cur)
        for level in (3, 9, 19):
            c = zstandard.ZstdCompressor(level=level)
            started = time.perf_counter()
            total = blooms = 0
            for b in blocks:
                ts, lines, meta = encode(b)
                total += len(c.compress(ts)) + len(c.compress(lines)) + len(c.compress(meta))
            took = time.perf_counter() - started
            if level == 3:
                for b in blocks:
                    grams = {line[i:i + 3].lower() for _, line, _ in b
                             for i in range(max(0, len(line) - 2))}
                    blooms += bloom_bytes(len(grams))
            rows_out.append((window_s, len(blocks), level, total / raw,
                             blooms / raw if level == 3 else None, raw / took / 1e6))
    print("| window | blocks | zstd level | compressed / text | trigram bloom (1%) / text "
          "| compress MB/s |")
    print("|---|---|---|---|---|---|")
    for w, n, lvl, ratio, bloom, speed in rows_out:
        print(f"| {w // 60} min | {n:,} | {lvl} | {ratio:.3f} | "
              f"{'' if bloom is None else f'{bloom:.3f}'} | {speed:.1f} |")


if __name__ == "__main__":
    main()
