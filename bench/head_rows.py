"""What SQLite alone costs for a many-stream push: the head as one row per line (today) against
one packed row per stream and push (issue 25's direction), with the server's own pragmas.

    .venv/bin/python bench/head_rows.py [--streams 20000] [--per-push 500] [--lines 10] [--runs 3]
    .venv/bin/python bench/head_rows.py --streams 30 --per-push 30 --lines 33 --pushes 1000

Each push creates `--per-push` new streams (a row in `streams`, one posting per label) and
writes `--lines` logfmt lines to each; with `--pushes N`, pushes past the streams' creation
write more lines to the same streams (the shape of issue 25's realistic ingest: 30 streams,
1,000-line pushes), in one transaction that commits as the writer commits
a push (WAL, synchronous=FULL): the bench of issue 22's table (`bench/cardinality.py`) less
HTTP, decoding and validation. Prints milliseconds per phase, summed over all pushes, best
of `--runs`; nothing is written to bench/REPORT.md (the figures are quoted there by hand).
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage import db as D  # noqa: E402

LINE = ("ts=2026-11-26T01:00:00.123Z level=info method=GET path=/api/v1/items/{i} status=200 "
        "latency_ms={ms} user=u{u} msg=\"served\" pod=pod-{i}")
PACKED = ("CREATE TABLE packed (id INTEGER PRIMARY KEY, stream_id INTEGER NOT NULL, "
          "min_ts INTEGER NOT NULL, max_ts INTEGER NOT NULL, rows INTEGER NOT NULL, "
          "keys BLOB NOT NULL, lengths BLOB NOT NULL, lines BLOB NOT NULL);"
          "CREATE INDEX packed_stream_time ON packed (stream_id, max_ts, min_ts);")


def run(mode: str, streams: int, per_push: int, lines: int, pushes: int,
        directory: str) -> dict[str, float]:
    path = os.path.join(directory, f"{mode}.db")
    conn = D.connect(path)
    for _, _, sql in D.migration_files():
        conn.executescript(sql)
    conn.executescript(PACKED)
    rnd = random.Random(7)
    now = time.time_ns()
    sid = eid = 0
    spent = dict.fromkeys(("streams", "postings", "lines", "commit"), 0.0)
    creating = streams // per_push
    for push in range(max(pushes, creating)):
        new, postings, rows = [], [], []
        for _ in range(per_push):
            if push < creating:
                sid += 1
                labels = {"app": f"a{sid % 50}", "env": "prod", "pod": f"pod-{sid}",
                          "service_name": f"a{sid % 50}"}
                text = "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
                new.append((sid, "bench", text, rnd.getrandbits(63), now, now))
                postings += [("bench", k, v, sid) for k, v in labels.items()]
            else:
                sid = sid % streams + 1  # the same streams again
            stamps = [now + (push * lines + k) * 300 * 10**9 + sid for k in range(lines)]
            texts = [LINE.format(i=sid, ms=rnd.randrange(1, 900), u=rnd.randrange(999))
                     for _ in range(lines)]
            if mode == "rows":
                for ts, line in zip(stamps, texts):
                    eid += 1
                    rows.append((eid, sid, ts, rnd.getrandbits(63), line, None))
            else:
                raw = [t.encode() for t in texts]
                rows.append((sid, stamps[0], stamps[-1], lines,
                             struct.pack(f"<{2 * lines}q", *stamps,
                                         *(rnd.getrandbits(62) for _ in stamps)),
                             struct.pack(f"<{lines}I", *map(len, raw)), b"".join(raw)))
        t0 = time.perf_counter()
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO streams (id, tenant, labels, fingerprint, first_ts, "
                         "last_ts) VALUES (?, ?, ?, ?, ?, ?)", new)
        t1 = time.perf_counter()
        conn.executemany("INSERT INTO stream_labels (tenant, name, value, stream_id) "
                         "VALUES (?, ?, ?, ?)", postings)
        t2 = time.perf_counter()
        if mode == "rows":
            conn.executemany("INSERT OR IGNORE INTO entries (id, stream_id, ts, hash, line, "
                             "metadata) VALUES (?, ?, ?, ?, ?, ?)", rows)
        else:
            conn.executemany("INSERT INTO packed (stream_id, min_ts, max_ts, rows, keys, "
                             "lengths, lines) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        t3 = time.perf_counter()
        conn.execute("COMMIT")
        t4 = time.perf_counter()
        for k, d in zip(spent, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            spent[k] += d * 1000
    conn.close()
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=20_000)
    ap.add_argument("--per-push", type=int, default=500)
    ap.add_argument("--lines", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pushes", type=int, default=0,
                    help="pushes in all (default: those that create the streams)")
    args = ap.parse_args()
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.runs):
        for mode in ("rows", "packed"):  # alternating, so both see the same machine
            with tempfile.TemporaryDirectory(prefix="logstore-head-") as directory:
                spent = run(mode, args.streams, args.per_push, args.lines, args.pushes,
                            directory)
            if mode not in best or sum(spent.values()) < sum(best[mode].values()):
                best[mode] = spent
    print(f"{args.streams} streams, {args.per_push} a push, {args.lines} lines each, "
          f"{max(args.pushes, args.streams // args.per_push)} pushes; "
          "ms summed over the pushes, best of", args.runs)
    for mode, spent in best.items():
        parts = ", ".join(f"{k} {v:,.0f}" for k, v in spent.items())
        print(f"  {mode:6} total {sum(spent.values()):7,.0f}  ({parts})")


if __name__ == "__main__":
    main()
