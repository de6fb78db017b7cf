"""Helpers for the pipeline stage tests (data from the shared loghub corpus)."""

import csv
import os

import pytest

from logql.pipeline.builder import LabelsBuilder
from logql.pipeline.stages import Pipeline

LOGHUB = os.environ.get("LOGHUB_DIR", "/work/shared/data/loghub")


def loghub_lines(system: str) -> list[str]:
    path = os.path.join(LOGHUB, system, f"{system}_2k.log")
    if not os.path.exists(path):
        pytest.skip(f"loghub data absent: {path}")
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n") for line in f]


def loghub_structured(system: str) -> list[dict]:
    path = os.path.join(LOGHUB, system, f"{system}_2k.log_structured.csv")
    if not os.path.exists(path):
        pytest.skip(f"loghub data absent: {path}")
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return list(csv.DictReader(f))


def run(stages, line, stream=None, sm=None, ts=0):
    """Run stages over one entry: (line or None, final labels dict)."""
    labels = LabelsBuilder(dict(stream or {}))
    labels.reset(sm)
    out = Pipeline(stages if isinstance(stages, list) else [stages]).process(ts, line, labels)
    return out, labels.labels()
