"""Throughput of common pipelines over the loghub corpus (not a test).

    .venv/bin/python tests/pipeline/bench_pipeline.py
"""

import csv
import os
from pathlib import Path
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from logql.pipeline.stages import Pipeline  # noqa: E402
from logql.pipeline.format import LineFormat  # noqa: E402
from logql.pipeline.label_filters import StringLabelFilter  # noqa: E402
from logql.pipeline.line import LineFilter  # noqa: E402
from logql.pipeline.parsers import JsonParser, LogfmtParser, PatternParser  # noqa: E402

LOGHUB = str(Path(__file__).resolve().parents[2].parent / "shared" / "data" / "loghub")


def corpus():
    lines, logfmt, js = [], [], []
    for system in sorted(os.listdir(LOGHUB)):
        path = os.path.join(LOGHUB, system, f"{system}_2k.log")
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines += [x.rstrip("\n") for x in f]
        path = os.path.join(LOGHUB, system, f"{system}_2k.log_structured.csv")
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                for row in csv.DictReader(f):
                    level = row.get("Level") or ("error" if "rror" in row["Content"] else "info")
                    content = row["Content"].replace("\\", "\\\\").replace('"', '\\"')
                    logfmt.append(f'ts={row["LineId"]} level={level.lower()} system={system} '
                                  f'event={row["EventId"]} msg="{content}"')
                    js.append('{"ts":%s,"level":"%s","system":"%s","msg":"%s"}'
                              % (row["LineId"], level.lower(), system, content))
    return lines, logfmt, js


def measure(name, pipeline, lines, repeat):
    sp = pipeline.for_stream({"app": "bench", "env": "prod"})
    process = sp.process
    kept = 0
    t0 = time.perf_counter()
    for _ in range(repeat):
        for line in lines:
            if process(0, line) is not None:
                kept += 1
    dt = time.perf_counter() - t0
    n = len(lines) * repeat
    print(f"{name:55s} {n / dt:>12,.0f} lines/s  (kept {kept // repeat} of {len(lines)})")


def measure_match_line(name, pipeline, lines, repeat):
    match = pipeline.match_line
    t0 = time.perf_counter()
    kept = 0
    for _ in range(repeat):
        for line in lines:
            if match(line):
                kept += 1
    dt = time.perf_counter() - t0
    n = len(lines) * repeat
    print(f"{name:55s} {n / dt:>12,.0f} lines/s  (kept {kept // repeat} of {len(lines)})")


def main():
    lines, logfmt, js = corpus()
    print(f"corpus: {len(lines)} raw loghub lines, {len(logfmt)} logfmt, {len(js)} json")
    measure_match_line('|= "error"  (Pipeline.match_line)', Pipeline([LineFilter("|=", ["error"])]), lines, 10)
    measure('|= "error"  (StreamPipeline.process)', Pipeline([LineFilter("|=", ["error"])]), lines, 10)
    measure('|= "error" != "debug"', Pipeline([LineFilter("|=", ["error"]), LineFilter("!=", ["debug"])]), lines, 10)
    measure('|~ "(?i)error"', Pipeline([LineFilter("|~", ["(?i)error"])]), lines, 5)
    measure('|~ "err(or)?\\s+\\d+"  (RE2)', Pipeline([LineFilter("|~", ["err(or)?\\s+\\d+"])]), lines, 3)
    measure('|> "<_> error <_>"', Pipeline([LineFilter("|>", ["<_> error <_>"])]), lines, 5)
    measure('| logfmt | level="error"  (logfmt lines)',
            Pipeline([LogfmtParser(), StringLabelFilter("level", "=", "error")]), logfmt, 2)
    measure('| logfmt | level="error"  (raw loghub lines)',
            Pipeline([LogfmtParser(), StringLabelFilter("level", "=", "error")]), lines, 1)
    measure('| json | level="error"  (json lines)',
            Pipeline([JsonParser(), StringLabelFilter("level", "=", "error")]), js, 2)
    measure('| pattern "<_> <level> <_>" (raw)', Pipeline([PatternParser("<_> <level> <_>")]), lines, 2)
    measure('| logfmt | line_format "{{.level}} {{.msg}}"',
            Pipeline([LogfmtParser(), LineFormat("{{.level}} {{.msg}}")]), logfmt, 2)
    measure('| logfmt | line_format "{{ .msg | upper | trunc 20 }}"',
            Pipeline([LogfmtParser(), LineFormat("{{ .msg | upper | trunc 20 }}")]), logfmt, 1)


if __name__ == "__main__":
    main()
