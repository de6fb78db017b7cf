"""FTS5 trigram prefilter: index build rate, index size, rare-needle latency with and without.

    .venv/bin/python bench/ingest.py --lines 1000000 --keep /tmp/lsbench   # once
    .venv/bin/python bench/fts.py --data /tmp/lsbench/data [--variants 200000]

Works on a copy of the database (the original is left alone). The index is emptied and
rebuilt exactly as the indexer service does it (`storage.fts.index_batch`, 2000 rows per
committed transaction). Query latencies are `logql.engine_logs.evaluate_log_query` on a
reader connection, in process (no HTTP), median of several runs, first without the index
(mark 0: the engine scans with its SQL line conditions), then with it. `--variants N` also
builds alternative index layouts over the first N lines to compare size and build speed.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from logql import parse_expr  # noqa: E402
from logql.engine.logs import evaluate_log_query  # noqa: E402
from storage.reader import LogReader  # noqa: E402
from report import machine, table, update_section  # noqa: E402
from storage import fts  # noqa: E402
from storage.db import connect  # noqa: E402

import dataset  # noqa: E402

DAY_NS = 86400 * 10**9
QUERIES = [
    ("rare needle, all 36 streams", '{env="bench"} |= "%s"' % dataset.RARE_NEEDLE),
    ("rare needle, case-insensitive", '{env="bench"} |~ "(?i)NEEDLE-0C0FFEE"'),
    ("rare needle, one stream", '{job="hdfs", host="host-a"} |= "%s"' % dataset.RARE_NEEDLE),
    ("absent needle", '{env="bench"} |= "no-such-text-anywhere"'),
    ("common needle (limit 100)", '{env="bench"} |= "error"'),
    ("two-char needle (no index)", '{env="bench"} |= "zz"'),
]


def index_size(conn: sqlite3.Connection, prefix: str = "entries_fts") -> int:
    return conn.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE ?",
                        (prefix + "%",)).fetchone()[0]


def build(conn: sqlite3.Connection, batch: int = 2000) -> tuple[int, float]:
    started = time.perf_counter()
    total = 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        added = fts.index_batch(conn, batch)
        conn.execute("COMMIT")
        total += added
        if added < batch:
            return total, time.perf_counter() - started


def latency(path: str, query: str, start: int, end: int, runs: int) -> tuple[float, int]:
    conn = connect(path, readonly=True)
    expr = parse_expr(query)
    times, found = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        result = evaluate_log_query(LogReader(conn), "fake", expr, start, end, limit=100, backward=True)
        times.append(time.perf_counter() - t)
        found = sum(len(s["values"]) for s in result)
    conn.close()
    return statistics.median(times), found


def variants(path: str, rows: int) -> list[list[object]]:
    """Size and build rate of other index layouts over the first `rows` lines."""
    conn = sqlite3.connect(path, isolation_level=None)
    raw = conn.execute("SELECT sum(length(CAST(line AS BLOB))) FROM entries WHERE id <= ?",
                       (rows,)).fetchone()[0]
    out = []
    layouts = [
        ("detail=none, case folded (chosen)", "tokenize='trigram case_sensitive 0', "
                                              "detail=none, columnsize=0"),
        ("detail=none, case-sensitive", "tokenize='trigram case_sensitive 1', detail=none, "
                                        "columnsize=0"),
        ("detail=column", "tokenize='trigram case_sensitive 0', detail=column, columnsize=0"),
        ("detail=full", "tokenize='trigram case_sensitive 0', detail=full, columnsize=0"),
    ]
    for i, (name, options) in enumerate(layouts):
        table_name = f"bench_fts_{i}"
        conn.execute(f"CREATE VIRTUAL TABLE {table_name} USING fts5(line, content='', "
                     f"{options})")
        started = time.perf_counter()
        for lo in range(0, rows, 2000):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(f"INSERT INTO {table_name} (rowid, line) SELECT id, line FROM entries "
                         "WHERE id > ? AND id <= ?", (lo, min(lo + 2000, rows)))
            conn.execute("COMMIT")
        took = time.perf_counter() - started
        size = index_size(conn, table_name)
        out.append([name, f"{rows / took:,.0f}", f"{size / 2**20:.1f} MiB",
                    f"{size / raw:.2f}x"])
        conn.execute(f"DROP TABLE {table_name}")
    conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="data directory made by bench/ingest.py")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variants", type=int, default=200_000,
                    help="lines for the layout comparison (0 to skip)")
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="logstore-fts-"))
    path = str(work / "logstore.db")
    try:
        src = sqlite3.connect(str(Path(args.data) / "logstore.db"))
        dst = sqlite3.connect(path)
        src.backup(dst)  # consistent copy, WAL included
        src.close()
        dst.close()
        conn = connect(path)
        lines, raw = conn.execute("SELECT count(*), sum(length(CAST(line AS BLOB))) "
                                  "FROM entries").fetchone()
        first, last = conn.execute("SELECT min(ts), max(ts) FROM entries").fetchone()
        start, end = last + 1 - DAY_NS, last + 1
        conn.execute("BEGIN IMMEDIATE")
        fts.reset(conn)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        without = {name: latency(path, q, start, end, args.runs) for name, q in QUERIES}
        added, took = build(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = index_size(conn)
        with_index = {name: latency(path, q, start, end, args.runs) for name, q in QUERIES}
        conn.close()

        build_rows = [["lines", f"{lines:,}"], ["raw line bytes", f"{raw / 2**20:.1f} MiB"],
                      ["index build (2000 rows per commit)", f"{took:.1f} s"],
                      ["index build rate", f"{added / took:,.0f} rows/s"],
                      ["index size", f"{size / 2**20:.1f} MiB"],
                      ["index size / raw text", f"{size / raw:.2f}x"]]
        query_rows = []
        for name, q in QUERIES:
            (t0, n0), (t1, n1) = without[name], with_index[name]
            assert n0 == n1, f"{name}: {n0} entries without the index, {n1} with it"
            query_rows.append([name, f"`{q}`", n1, f"{t0 * 1000:.1f} ms",
                               f"{t1 * 1000:.1f} ms", f"{t0 / t1:.1f}x"])
        text = (table(["measure", "value"], build_rows) + "\n\n"
                + table(["query (24 h, limit 100)", "LogQL", "entries", "no index",
                         "with index", "speed-up"], query_rows))
        if args.variants:
            text += "\n\nIndex layouts over the first {:,} lines:\n\n".format(args.variants)
            text += table(["layout", "build rows/s", "size", "size / raw text"],
                          variants(path, args.variants))
        print(text)
        if not args.no_report:
            update_section(
                "FTS prefilter (bench/fts.py)",
                f"Command: `.venv/bin/python bench/fts.py --data DIR/data` after "
                f"`bench/ingest.py --lines {lines} --keep DIR`\n\nMachine: {machine()}; "
                f"latencies are the median of {args.runs} in-process `evaluate_log_query` "
                f"runs.\n\n{text}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
