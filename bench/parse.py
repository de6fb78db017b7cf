"""LogQL parser throughput: queries parsed per second over the test corpus.

    .venv/bin/python bench/parse.py [--seconds 2] [--no-report]

Parses every valid query of tests/logql/corpus_valid.py with ``logql.parser.parse_expr`` (all
static checks included, no caching) repeatedly for about ``--seconds`` per group, prints a
table and replaces the "LogQL parser (bench/parse.py)" section of bench/REPORT.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from logql.syntax.printer import pretty  # noqa: E402
from logql.syntax.parser import parse_expr  # noqa: E402
from report import machine, table, update_section  # noqa: E402
from tests.logql.corpus_valid import VALID  # noqa: E402

TITLE = "LogQL parser (bench/parse.py)"

# What dashboards and alert rules typically send.
TYPICAL = [
    '{app="api", env="prod"}',
    '{app="api"} |= "error" != "timeout"',
    '{app="api"} | json | status >= 500',
    '{app="api"} | logfmt | level="error" | line_format "{{.msg}}"',
    'sum by (level) (count_over_time({app="api"} | logfmt [5m]))',
    'sum(rate({app="api"} |= "error" [1m])) by (host)',
    'topk(5, sum by (path) (rate({app="api"} | json [5m])))',
    'quantile_over_time(0.99, {app="api"} | json | unwrap duration(latency) | __error__="" [5m]) '
    'by (path)',
    'sum by (host) (rate({app="api"} |= "error" [5m])) / sum by (host) (rate({app="api"}[5m]))',
    'sum(count_over_time({app="api"}[5m])) or vector(0)',
]


def measure(queries: list[str], seconds: float, fn=parse_expr) -> tuple[float, int]:
    """Queries per second (best of three rounds of about seconds/3 each)."""
    for q in queries:  # warm caches (regex compilation is cached by design)
        fn(q)
    best = 0.0
    total = 0
    for _ in range(3):
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds / 3
        while True:
            for q in queries:
                fn(q)
            n += len(queries)
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, n / (now - t0))
        total += n
    return best, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="time per group")
    ap.add_argument("--no-report", action="store_true", help="print only")
    args = ap.parse_args()

    corpus = [q for q, _ in VALID]
    metric = [q for q in corpus if not q.lstrip("(\n\t ").startswith("{")]
    logq = [q for q in corpus if q not in set(metric)]
    groups = [
        ("typical dashboard queries", TYPICAL, parse_expr),
        ("corpus: log queries", logq, parse_expr),
        ("corpus: metric queries", metric, parse_expr),
        ("corpus: all valid queries", corpus, parse_expr),
        ("format_query (parse + pretty), typical", TYPICAL,
         lambda q: pretty(parse_expr(q, check_stages=False))),
    ]
    rows = []
    for name, qs, fn in groups:
        qps, n = measure(qs, args.seconds, fn)
        avg_len = sum(map(len, qs)) / len(qs)
        rows.append([name, len(qs), f"{avg_len:.0f}", f"{qps:,.0f}", f"{1e6 / qps:.1f}"])
    headers = ["queries", "count", "avg chars", "queries/s", "µs/query"]
    out = table(headers, rows)
    print(out)
    if not args.no_report:
        cmd = "`.venv/bin/python bench/parse.py" + (
            f" --seconds {args.seconds:g}`" if args.seconds != 2.0 else "`")
        body = (f"Command: {cmd}\n\nMachine: {machine()}; single thread, in-process.\n\n"
                "Each group is parsed in a loop (best of three rounds) with `parse_expr`, which "
                "runs every static check; compiled regexes are cached across calls. "
                "Aim: at least 20,000 typical queries/s.\n\n" + out)
        update_section(TITLE, body)


if __name__ == "__main__":
    main()
