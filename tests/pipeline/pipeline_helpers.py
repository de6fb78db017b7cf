"""Helpers for the pipeline stage tests (data from the shared loghub corpus)."""

import csv

from logql.pipeline.builder import LabelsBuilder
from logql.pipeline.stages import Pipeline
from tests.conftest import loghub_file

def loghub_lines(system: str) -> list[str]:
    with open(loghub_file(system), encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n") for line in f]


def loghub_structured(system: str) -> list[dict]:
    path = loghub_file(system, ".log_structured.csv")
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return list(csv.DictReader(f))


def run(stages, line, stream=None, sm=None, ts=0):
    """Run stages over one entry: (line or None, final labels dict)."""
    labels = LabelsBuilder(dict(stream or {}))
    labels.reset(sm)
    out = Pipeline(stages if isinstance(stages, list) else [stages]).process(ts, line, labels)
    return out, labels.labels()
