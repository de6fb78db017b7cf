"""AST -> execution plan for log queries (and the log part of metric queries).

A `LogPlan` says what storage must read and what Python must still do:

* `matchers`   the stream selector, turned into stream ids through the label postings;
* `conditions` exact-superset tests on the raw stored line (`logql.reading.LineConditions`)
               taken from the leading line filters: storage evaluates them (SQLite in
               SQL), so lines that cannot match never reach Python;
* `needles`    the same leading filters as an AND of ORs of `(text, case_insensitive)`, for
               the sealed blocks' trigram Bloom filters (needles shorter than 3 characters
               are left out);
* `pipeline`   every stage as a composed Python object (`logql.pipeline.Pipeline`), with line
               filters hoisted in front of earlier stages the way Loki does it.

The storage-side tests only narrow: the pipeline re-checks every row it is given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable
from functools import lru_cache

from logql.syntax import ast as A
from logql.pipeline import stages as P
from logql.gocompat.filters import PipelineError
from logql.model import Needle
from logql.pipeline.json_parser import JsonNumberGate, JsonParser
from logql.pipeline.label_filters import NumericLabelFilter, RequiredLabelValues
from logql.reading import LineConditions

MIN_NEEDLE = 3


@dataclass(frozen=True)
class LogPlan:
    query: A.LogQuery
    matchers: tuple[A.LabelMatcher, ...]
    pipeline: P.Pipeline
    conditions: LineConditions
    needles: tuple[tuple[Needle, ...], ...]
    # the pipeline only filters lines: labels need not be tracked per entry
    line_only: bool
    # what a `| parser | name="value"` filter demands (RequiredLabelValues)
    label_values: tuple[tuple[str, str], ...] = ()

    def conditions_for(self, stream_labels: Iterable[dict[str, str]]) -> LineConditions:
        """The line conditions for scanning these streams: `label_values` apply only when
        none of the streams carries the label (the stream's own value could satisfy it)."""
        if not self.label_values:
            return self.conditions
        names = set().union(*stream_labels)
        demanded = [(n, v) for n, v in self.label_values if n not in names]
        if not demanded:
            return self.conditions
        return replace(self.conditions, label_values=demanded)


def compile_log_query(query: A.LogQuery, read_labels: frozenset[str] | None = None) -> LogPlan:
    """Plan for a log query; raises PipelineError (answered 400) if a stage cannot be built.

    `read_labels`: when the rest of the query reads only these labels (see
    `labels_read_after`), parsers extract only them, as Loki's parsers do."""
    return _compile_cached(query, read_labels)


@lru_cache(maxsize=256)
def _compile_cached(query: A.LogQuery, read_labels: frozenset[str] | None) -> LogPlan:
    stages = _gate_json_numbers(
        P.hoist_line_filters([compile_stage(s, read_labels) for s in query.stages]))
    required = _required_label_values(query.stages)
    if required:
        stages.insert(0, RequiredLabelValues(required))
    pipeline = P.Pipeline(stages)
    leading = _leading_line_filters(query.stages)
    return LogPlan(
        query=query,
        matchers=query.selector.matchers,
        pipeline=pipeline,
        conditions=_line_conditions(leading),
        needles=_block_needles(pipeline),
        line_only=pipeline.line_only,
        label_values=tuple(required),
    )


def compile_stage(stage: A.Stage, read_labels: frozenset[str] | None = None):
    """One AST stage -> the pipeline object that runs it."""
    if isinstance(stage, A.LineFilter):
        return P.LineFilter(stage.op, [_filter_value(f) for f in (stage, *stage.alternatives)])
    if isinstance(stage, A.JsonParser):
        return P.JsonParser([(e.name, e.expr) for e in stage.params] or None)
    if isinstance(stage, A.LogfmtParser):
        return P.LogfmtParser(stage.strict, stage.keep_empty,
                              [(e.name, e.expr) for e in stage.params] or None,
                              only=read_labels)
    if isinstance(stage, A.RegexpParser):
        return P.RegexpParser(stage.pattern)
    if isinstance(stage, A.PatternParser):
        return P.PatternParser(stage.pattern)
    if isinstance(stage, A.UnpackParser):
        return P.UnpackParser()
    if isinstance(stage, A.LabelFilterStage):
        return compile_label_filter(stage.filter)
    if isinstance(stage, A.LineFormat):
        return P.LineFormat(stage.template)
    if isinstance(stage, A.LabelFormat):
        return P.LabelFormat([(i.dst, i.value, not i.rename) for i in stage.items])
    if isinstance(stage, A.Decolorize):
        return P.Decolorize()
    if isinstance(stage, A.Drop):
        return P.Drop([_named(i) for i in stage.items])
    if isinstance(stage, A.Keep):
        return P.Keep([_named(i) for i in stage.items])
    raise PipelineError(f"unsupported pipeline stage: {stage}")


def compile_label_filter(f: A.LabelFilterExpr):
    if isinstance(f, A.StringLabelFilter):
        return P.StringLabelFilter(f.name, f.op, f.value)
    if isinstance(f, A.NumericLabelFilter):
        return P.NumericLabelFilter(f.name, f.op, f.value)
    if isinstance(f, A.DurationLabelFilter):
        return P.DurationLabelFilter(f.name, f.op, f.value)
    if isinstance(f, A.BytesLabelFilter):
        return P.BytesLabelFilter(f.name, f.op, f.value)
    if isinstance(f, A.IpLabelFilter):
        return P.IpLabelFilter(f.name, f.op, f.pattern)
    if isinstance(f, A.AndLabelFilter):
        return P.And(compile_label_filter(f.left), compile_label_filter(f.right))
    if isinstance(f, A.OrLabelFilter):
        return P.Or(compile_label_filter(f.left), compile_label_filter(f.right))
    raise PipelineError(f"unsupported label filter: {f}")


def compile_unwrap(unwrap: A.Unwrap) -> P.Unwrap:
    """The unwrap stage of a range aggregation, post filters included."""
    return P.Unwrap(unwrap.label, unwrap.conversion,
                    [compile_label_filter(f) for f in unwrap.post_filters])


def _filter_value(f: A.LineFilter):
    return ("ip", f.value) if f.ip else f.value


def _named(item: A.NamedMatcher):
    if item.matcher is None:
        return item.name
    return (item.name, item.matcher.op, item.matcher.value)


# -- what storage can test on the raw line ------------------------------------------------------

def _leading_line_filters(stages: tuple) -> list[A.LineFilter]:
    """Line filters that see the stored line: after hoisting, every line filter that is not
    behind a line_format, unpack or label filter (Loki's hoisting barriers)."""
    out = []
    for stage in stages:
        if isinstance(stage, A.LineFilter):
            out.append(stage)
        elif isinstance(stage, (A.LineFormat, A.UnpackParser, A.LabelFilterStage)):
            break
    return out


def _line_conditions(filters: list[A.LineFilter]) -> LineConditions:
    cond = LineConditions()
    for f in filters:
        if f.op == "!=" and not f.ip and not f.alternatives:
            cond.none_of.append(f.value)
            continue
        if f.op not in ("|=", "|~", "|>"):
            continue
        part = P.LineFilter(f.op, [_filter_value(x) for x in (f, *f.alternatives)]) \
            .required_substrings()
        if part:
            cond.all_of.extend([list(clause) for clause in part])
    return cond


def _gate_json_numbers(stages: list) -> list:
    """A JsonNumberGate before each `| json` that a numeric filter follows directly."""
    out: list = []
    for i, stage in enumerate(stages):
        after = stages[i + 1] if i + 1 < len(stages) else None
        if isinstance(stage, JsonParser) and stage.extractions is None \
                and type(after) is NumericLabelFilter and JsonNumberGate.applies(after.name):
            out.append(JsonNumberGate(after.name, after))
        out.append(stage)
    return out


# stages that copy label values verbatim out of the line, or only drop entries
_VERBATIM_STAGES = (A.LineFilter, A.JsonParser, A.LogfmtParser, A.RegexpParser, A.PatternParser,
                    A.LabelFilterStage)


def _required_label_values(stages: tuple) -> list[tuple[str, str]]:
    """`(name, value)` pairs that a positive string equality filter demands, for filters
    reached through verbatim stages only, after at least one parser (see
    RequiredLabelValues for why the value must then occur in the line)."""
    out: list[tuple[str, str]] = []
    parsed = False
    for stage in stages:
        if not isinstance(stage, _VERBATIM_STAGES):
            break
        if isinstance(stage, A.LabelFilterStage):
            if parsed:
                out.extend(_equalities(stage.filter))
        elif not isinstance(stage, A.LineFilter):
            parsed = True
    return out


def _equalities(f: A.LabelFilterExpr) -> list[tuple[str, str]]:
    if isinstance(f, A.StringLabelFilter):
        # `__error__` and its kin are set by failing stages, not copied out of the line
        internal = f.name.startswith("__") and f.name.endswith("__")
        return [(f.name, f.value)] if f.op == "=" and f.value and not internal else []
    if isinstance(f, A.AndLabelFilter):
        return _equalities(f.left) + _equalities(f.right)
    return []


def _block_needles(pipeline: P.Pipeline) -> tuple[tuple[Needle, ...], ...]:
    cnf = pipeline.required_substrings() or []
    out = []
    for clause in cnf:
        # an OR with any short alternative cannot be answered by a trigram filter
        if clause and all(len(text) >= MIN_NEEDLE for text, _ in clause):
            out.append(tuple(clause))
    return tuple(out)


# stages after which the labels a query reads can still be named (nothing rewrites, renames
# or prints labels): only then may a parser skip the keys nobody reads
_PRUNABLE = (A.LineFilter, A.LogfmtParser, A.LabelFilterStage, A.Decolorize)


def labels_read_after(query: A.LogQuery, unwrap: A.Unwrap | None,
                      grouping: A.Grouping | None) -> frozenset[str] | None:
    """The labels a range aggregation `by (...)` reads of its pipeline's parsed labels: the
    grouping, the label filters and the unwrapped label. None when that cannot be known
    (no `by`, `without`, formatting stages, other parsers, ...): then parsers keep all."""
    if grouping is None or grouping.without or not grouping.labels:
        return None
    if not all(isinstance(s, _PRUNABLE) for s in query.stages):
        return None
    names = set(grouping.labels)
    filters = [s.filter for s in query.stages if isinstance(s, A.LabelFilterStage)]
    if unwrap is not None:
        names.add(unwrap.label)
        filters += list(unwrap.post_filters)
    while filters:
        f = filters.pop()
        if isinstance(f, (A.AndLabelFilter, A.OrLabelFilter)):
            filters += [f.left, f.right]
        else:
            names.add(f.name)
    return frozenset(names)

