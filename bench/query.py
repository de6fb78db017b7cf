"""Query latency on the benchmark data set, through a real `logstore serve`.

    .venv/bin/python bench/ingest.py --lines 1000000 --keep /tmp/qbench --no-report
    .venv/bin/python bench/query.py --dir /tmp/qbench [--runs 7] [--only NAME ...]
    .venv/bin/python bench/query.py --dir /tmp/qbench --profile "rare needle"

Every query in QUERIES runs once to warm up, then `--runs` times; the report gives the median
wall time seen by the client, the server's own `execTime`, what the stats say was read
(`totalLinesProcessed`) and, for the rows marked full-scan, lines processed per second.
The range is the whole data set (its oldest to its newest entry). The server is started on
the kept data directory and the sealer is given time to catch up first.

To add a row, append to QUERIES: `name`, `query`, and for log queries `limit`; metric
queries set `kind="metric"` and optionally `step` (the range is the same).
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import json
import pstats
import signal
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from background import data_range, wait_for_background  # noqa: E402
from report import machine, table, update_section  # noqa: E402

QUERIES: list[dict] = [
    {"name": "rare needle", "query": '{env="bench"} |= "needle-0c0ffee"', "limit": 100},
    {"name": "rare needle, (?i) regex", "query": '{env="bench"} |~ "(?i)NEEDLE-0C0FFEE"',
     "limit": 100},
    {"name": "common needle, limit 100", "query": '{env="bench"} |= "error"', "limit": 100},
    {"name": "common needle, limit 5000", "query": '{env="bench"} |= "error"', "limit": 5000},
    {"name": "regex filter, limit 100", "query": '{env="bench"} |~ "Failed password for .* from"',
     "limit": 100},
    {"name": "short needle (no index), full scan", "query": '{env="bench"} |= "qz"',
     "limit": 5000, "full_scan": True},
    {"name": "regex without literals, full scan", "query": '{env="bench"} |~ "[0-9]{6}q"',
     "limit": 5000, "full_scan": True},
    {"name": "selector only, limit 5000", "query": '{env="bench"}', "limit": 5000},
    {"name": "logfmt level=error, limit 100", "query": '{job="app"} | logfmt | level="error"',
     "limit": 100},
    {"name": "logfmt level=error, full scan", "query": '{job="app"} | logfmt | level="error"',
     "limit": 5000, "full_scan": True},
    {"name": "json status>=500, limit 100", "query": '{job="web"} | json | status >= 500',
     "limit": 100},
    {"name": "json status>=500, full scan", "query": '{job="web"} | json | status >= 500',
     "limit": 5000, "full_scan": True},
    {"name": "line_format, limit 1000",
     "query": '{job="apache"} | line_format "{{.job}} {{.host}}: {{__line__}}"', "limit": 1000},
]


NOTES = """
How to read it: `lines processed` is what the query examined: rows SQLite looked at (including
those the pushed-down line conditions rejected inside SQLite; counted from the per-minute
rollups plus the partial edge minutes), plus the FTS candidates and unindexed tail rows read.
Limited queries stop after their first windows; the full-scan rows read the whole selection.

Where the time goes:
- Rare needle: the first three time windows (~21 min of data) are scanned plainly in case the
  needle is common; the rest of the range comes from the FTS trigram candidates plus the
  unindexed tail, ordered by their keys, lines read only as far as the limit needs.
- Line filters run inside SQLite (`instr`; `LIKE` for ASCII `(?i)` needles without k/s), so a
  scan with a needle too short for the index runs at SQLite speed and Python sees only the
  matching rows.
- Parser pipelines are bound by the Python stages. cProfile of the logfmt full scan
  (`bench/query.py --dir DIR --profile "logfmt level=error, full scan"`): about 70 % in
  `LogfmtParser.process`/`scan_logfmt`, ~12 % resetting the per-entry label state, ~6 %
  fetching rows from SQLite, ~5 % the engine's own loop. Not done: parsing only the keys that
  later filters need for lines those filters will drop.
- `regex filter, limit 100`: the regex's literals narrow in SQLite and through the index; most
  of the remaining time is the FTS candidate list (about 14 k ids) and RE2 per candidate.
"""


def run_query(port: int, spec: dict, start: int, end: int) -> tuple[float, dict]:
    params = {"query": spec["query"], "start": str(start), "end": str(end)}
    if spec.get("kind", "log") == "log":
        params["limit"] = str(spec.get("limit", 100))
    elif "step" in spec:
        params["step"] = str(spec["step"])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    began = time.perf_counter()
    conn.request("GET", "/logstore/api/v1/query_range?" + urlencode(params))
    resp = conn.getresponse()
    body = resp.read()
    wall = time.perf_counter() - began
    conn.close()
    if resp.status != 200:
        raise SystemExit(f"{spec['name']}: {resp.status} {body[:300]!r}")
    return wall, json.loads(body)["data"]


def measure(port: int, spec: dict, start: int, end: int, runs: int) -> list:
    run_query(port, spec, start, end)  # warm-up: page cache, compiled plan
    walls, execs, data = [], [], None
    for _ in range(runs):
        wall, data = run_query(port, spec, start, end)
        walls.append(wall)
        execs.append(data["stats"]["summary"]["execTime"])
    summary = data["stats"]["summary"]
    returned = summary["totalEntriesReturned"]
    lines = summary["totalLinesProcessed"]
    exec_median = statistics.median(execs)
    rate = f"{lines / exec_median:,.0f}" if spec.get("full_scan") and exec_median else ""
    return [spec["name"], f"`{spec['query']}`", spec.get("limit", ""),
            f"{statistics.median(walls) * 1000:.1f}", f"{exec_median * 1000:.1f}",
            f"{lines:,}", f"{returned:,}", rate]


def profile(data_dir: Path, spec: dict, start: int, end: int) -> str:
    """cProfile of one evaluation in-process, on a read-only connection."""
    from logql import parse_expr
    from logql.engine.logs import evaluate_log_query
    from storage.reader import LogReader
    from storage.db import connect

    conn = connect(str(data_dir / "logstore.db"), readonly=True)
    expr = parse_expr(spec["query"])
    evaluate_log_query(LogReader(conn), "fake", expr, start, end, limit=spec.get("limit", 100))
    prof = cProfile.Profile()
    prof.enable()
    evaluate_log_query(LogReader(conn), "fake", expr, start, end, limit=spec.get("limit", 100))
    prof.disable()
    out = []

    class Sink:
        def write(self, text: str) -> None:
            out.append(text)

    pstats.Stats(prof, stream=Sink()).sort_stats("tottime").print_stats(12)
    return "".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="the --keep directory of bench/ingest.py")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", nargs="*", help="names of the queries to run")
    ap.add_argument("--profile", help="print a cProfile of this named query and exit")
    ap.add_argument("--no-report", action="store_true")
    import ingest  # the server start-up of the ingest benchmark
    ingest.add_backend_flag(ap)
    args = ap.parse_args()

    data_dir = Path(args.dir) / "data"
    db_path = data_dir / "logstore.db"
    if not db_path.exists():
        raise SystemExit(f"no data at {db_path}: run bench/ingest.py --keep {args.dir} first")
    specs = [q for q in QUERIES if not args.only or q["name"] in args.only]
    clickhouse = args.backend == "clickhouse"
    if clickhouse:
        start, end, entries = ingest.clickhouse_facts(data_dir)
    else:
        start, end = data_range(db_path)
    if args.profile:
        spec = next(q for q in QUERIES if q["name"] == args.profile)
        print(profile(data_dir, spec, start, end))
        return

    port = ingest.free_port()
    proc = ingest.start_server(data_dir, port, ingest.backend_config(args.backend, data_dir))
    try:
        pending = wait_for_background(db_path)
        rows = [measure(port, spec, start, end, args.runs) for spec in specs]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    if not clickhouse:
        entries = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True).execute(
            "SELECT (SELECT count(*) FROM entries) + "
            "(SELECT coalesce(sum(rows), 0) FROM blocks)").fetchone()[0]
    headers = ["query", "LogQL", "limit", "median ms (client)", "median execTime ms",
               "lines processed", "entries returned", "lines/s (full scans)"]
    text = table(headers, rows)
    print(text)
    if args.no_report:
        return
    index_note = ("sealer caught up before measuring (the last hour in the head)"
                  if pending == 0 else f"sealer still {pending:,} rows behind when measuring")
    flag = " --backend clickhouse" if clickhouse else ""
    body = (f"Command: `.venv/bin/python bench/query.py --dir DIR --runs {args.runs}{flag}` "
            f"after `bench/ingest.py --lines 1000000 --keep DIR{flag}`\n\n"
            f"Machine: {machine()}; client and server share it. Data: {entries:,} entries, "
            f"36 streams over 24 h; {index_note}. Range: the whole data set. Median of "
            f"{args.runs} runs after one warm-up.\n\n{text}\n{NOTES}")
    update_section("Log queries" + (", ClickHouse (chdb)" if clickhouse else "")
                   + " (bench/query.py)", body)


if __name__ == "__main__":
    main()
