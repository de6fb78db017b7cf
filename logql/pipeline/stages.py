"""LogQL log pipeline: a list of stages run left to right over every entry.

Each stage is one small object with `process(ts, line, labels) -> str | None`
(None drops the entry; the string is the possibly rewritten line). `labels` is
a `LabelsBuilder` (logql/labels.py) reset for every entry.

Typical use by the query engine::

    pipe = Pipeline([LineFilter("|=", ["error"]), LogfmtParser(), StringLabelFilter("level", "=", "error")])
    sp = pipe.for_stream({"app": "api"})
    for ts, line, sm in rows:
        out = sp.process(ts, line, sm)
        if out is not None:
            new_line, labels = out           # labels.labels() is the final label set

Pipelines made only of line filters expose `match_line(line) -> bool` and
`line_only` so callers can skip label handling entirely.
"""

from __future__ import annotations

from logql.pipeline.builder import LabelsBuilder
from logql.pipeline.label_filters import (And, BytesLabelFilter, Drop, DurationLabelFilter, IpLabelFilter, Keep,
                            NumericLabelFilter, Or, StringLabelFilter, Unwrap)
from logql.pipeline.line import Decolorize, LineFilter
from logql.pipeline.parsers import JsonParser, LogfmtParser, PatternParser, RegexpParser, UnpackParser
from logql.gocompat.filters import PipelineError

from logql.pipeline.format import LabelFormat, LineFormat

_LABEL_FILTERS = (StringLabelFilter, NumericLabelFilter, DurationLabelFilter, BytesLabelFilter,
                  IpLabelFilter, And, Or)


def is_label_filter(stage) -> bool:
    return isinstance(stage, _LABEL_FILTERS)


def hoist_line_filters(stages: list) -> list:
    """Move line filters in front of earlier stages, as Loki does (§5, observed
    #10), but never across line_format, unpack or a label filter."""
    out: list = []
    barrier = 0  # index in `out` that a line filter may not move before
    for stage in stages:
        if isinstance(stage, LineFilter):
            out.insert(barrier, stage)
            barrier += 1
            continue
        out.append(stage)
        if isinstance(stage, (LineFormat, UnpackParser)) or is_label_filter(stage):
            barrier = len(out)
    return out


class Pipeline:
    """Composition of stages. `Pipeline([])` is a no-op with a fast path."""

    __slots__ = ("stages", "line_only", "is_noop", "_matchers", "_procs")

    def __init__(self, stages=()):
        self.stages = list(stages)
        self.is_noop = not self.stages
        self.line_only = all(isinstance(s, LineFilter) for s in self.stages)
        self._matchers = tuple(s.match for s in self.stages) if self.line_only else ()
        self._procs = tuple(s.process for s in self.stages)

    def match_line(self, line: str) -> bool:
        """For line-only pipelines: does the line survive every filter?"""
        for m in self._matchers:
            if not m(line):
                return False
        return True

    def process(self, ts: int, line: str, labels: LabelsBuilder) -> str | None:
        """Run all stages over one entry; `labels` must be reset for it."""
        for proc in self._procs:
            line = proc(ts, line, labels)
            if line is None:
                return None
        return line

    def for_stream(self, stream_labels: dict[str, str]) -> "StreamPipeline":
        return StreamPipeline(self, stream_labels)

    def required_substrings(self):
        """AND of ORs of needles over the leading line filters (those that see
        the raw stored line), or None. See LineFilter.required_substrings."""
        cnf: list = []
        for stage in self.stages:
            if not isinstance(stage, LineFilter):
                break
            part = stage.required_substrings()
            if part:
                cnf.extend(part)
        return cnf or None

    def __repr__(self) -> str:
        return f"Pipeline({self.stages!r})"


class StreamPipeline:
    """A pipeline bound to one stream: owns the LabelsBuilder reused per entry."""

    __slots__ = ("pipeline", "labels", "_procs", "_line_only")

    def __init__(self, pipeline: Pipeline, stream_labels: dict[str, str]):
        self.pipeline = pipeline
        self.labels = LabelsBuilder(stream_labels)
        self._procs = pipeline._procs
        self._line_only = pipeline.line_only

    def process(self, ts: int, line: str, structured_metadata=None) -> tuple[str, LabelsBuilder] | None:
        """(line, labels) when the entry survives, else None. The returned
        builder is reused by the next call: read what you need first."""
        labels = self.labels.reset(structured_metadata)
        if self._line_only:
            return (line, labels) if self.pipeline.match_line(line) else None
        for proc in self._procs:
            line = proc(ts, line, labels)
            if line is None:
                return None
        return line, labels


__all__ = [
    "Pipeline", "StreamPipeline", "hoist_line_filters", "is_label_filter", "PipelineError", "LabelsBuilder",
    "LineFilter", "Decolorize", "JsonParser", "LogfmtParser", "RegexpParser", "PatternParser", "UnpackParser",
    "StringLabelFilter", "NumericLabelFilter", "DurationLabelFilter", "BytesLabelFilter", "IpLabelFilter",
    "And", "Or", "Drop", "Keep", "Unwrap", "LineFormat", "LabelFormat",
]
