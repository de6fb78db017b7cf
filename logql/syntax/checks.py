"""Static checks: parser-argument validation (regexp/pattern/ip), the validation pass Loki
runs after parsing (spec §3), and the checks Loki defers to pipeline build time."""

from __future__ import annotations

import re

from logql.syntax import ast as A
from logql.errors import ERR_EMPTY_MATCHERS, ParseError
from logql.gocompat.filters import IpMatcher, PipelineError
from logql.gocompat.regexp import capture_names, go_regex_error, num_groups
from logql.patterns import split_pattern, structure_error

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


# ----------------------------------------------------------------------------- patterns

def pattern_parser_error(p: str) -> str | None:
    nodes = split_pattern(p)
    if not any(is_cap and t != "_" for is_cap, t in nodes):
        return "at least one capture is required"
    return structure_error(nodes)


def pattern_filter_error(p: str) -> str | None:
    """``|>``/``!>`` patterns: only ``<_>`` wildcards, never two in a row."""
    if not p:
        return None
    nodes = split_pattern(p)
    err = structure_error(nodes)
    if err:
        return err
    for is_cap, t in nodes:
        if is_cap and t != "_":
            return f"named captures are not allowed: found '<{t}>'"
    return None


def regexp_parser_error(pattern: str) -> str | None:
    err = go_regex_error(pattern)
    if err is not None:
        return err
    if num_groups(pattern) == 0:
        return "at least one named capture must be supplied"
    seen = set()
    names = [n for n in capture_names(pattern) if n]
    for n in names:
        if not _LABEL_NAME.match(n):
            return f"invalid extracted label name '{n}'"
        if n in seen:
            return f"duplicate extracted label name '{n}'"
        seen.add(n)
    if not names:
        return "at least one named capture must be supplied"
    return None


def ip_pattern_error(p: str) -> str | None:
    """Single address, CIDR, or inclusive range ``A-B`` of one family (the pipeline's own
    reading of the pattern, so the two never disagree)."""
    try:
        IpMatcher(p)
    except PipelineError as exc:
        return str(exc)
    return None


# ----------------------------------------------------------------------------- validation pass

def _check_selector(sel) -> None:
    for m in sel.matchers:
        if not m.matches(""):
            return
    raise ParseError(ERR_EMPTY_MATCHERS)


def validate(expr, deferred: dict) -> None:
    """Loki's ``validateExpr``: deferred constructor errors and the selector rule, in tree
    order (left leg first)."""
    t = type(expr)
    if t is A.LogQuery:
        _check_selector(expr.selector)
    elif t is A.BinaryOp:
        validate(expr.lhs, deferred)
        validate(expr.rhs, deferred)
    elif t is A.VectorAggregation:
        if expr.op in ("sort", "sort_desc") and expr.grouping.labels:
            raise ParseError("sort and sort_desc doesn't allow grouping by ")
        validate(expr.expr, deferred)
    elif t is A.RangeAggregation:
        err = deferred.get(id(expr))
        if err is not None:
            raise err
        _check_selector(expr.log_range.query.selector)
    elif t is A.LabelReplace:
        validate(expr.expr, deferred)
    else:  # VectorExpr, NumberLiteral
        err = deferred.get(id(expr))
        if err is not None:
            raise err


# ----------------------------------------------------------------------------- build-time checks

def _stage_error(stage, detail: str) -> ParseError:
    return ParseError(f"stage '{stage}' : {detail}")


def check_stage(stage) -> None:
    """Errors Loki raises when it builds the pipeline (spec §3, last table)."""
    t = type(stage)
    if t is A.LineFilter:
        for f in (stage,) + stage.alternatives:
            if f.ip:
                if f.op not in ("|=", "!="):
                    raise _stage_error(stage, "ip: invalid operation")
                err = ip_pattern_error(f.value)
            elif f.op in ("|~", "!~"):
                err = go_regex_error(f.value)
            elif f.op in ("|>", "!>"):
                err = pattern_filter_error(f.value)
            else:
                err = None
            if err:
                raise _stage_error(stage, err)
    elif t is A.LabelFormat:
        seen = set()
        for item in stage.items:
            if item.dst == "__error__":
                raise _stage_error(stage, "__error__ cannot be formatted")
            if item.dst in seen:
                raise _stage_error(
                    stage, f"multiple label name '{item.dst}' not allowed in a single format "
                    "operation")
            seen.add(item.dst)
    elif t is A.LabelFilterStage:
        _check_label_filter(stage, stage.filter)


def _check_label_filter(stage, f) -> None:
    if type(f) in (A.AndLabelFilter, A.OrLabelFilter):
        _check_label_filter(stage, f.left)
        _check_label_filter(stage, f.right)
    elif type(f) is A.IpLabelFilter:
        err = ip_pattern_error(f.pattern)
        if err:
            raise _stage_error(stage, err)


def check_stages(expr) -> None:
    t = type(expr)
    if t is A.LogQuery:
        for s in expr.stages:
            check_stage(s)
    elif t is A.RangeAggregation:
        check_stages(expr.log_range.query)
        u = expr.log_range.unwrap
        if u is not None:
            for f in u.post_filters:
                _check_label_filter(A.LabelFilterStage(f), f)
    elif t is A.BinaryOp:
        check_stages(expr.lhs)
        check_stages(expr.rhs)
    elif t in (A.VectorAggregation, A.LabelReplace):
        check_stages(expr.expr)
