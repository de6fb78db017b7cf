"""Metric query evaluation (spec logql.md §7, http-api.md §4): the entry point the query route
calls, step planning and result assembly.

The query service calls, on a reader thread, with a ``logql.reading.Reader``::

    result = evaluate_metric(reader, tenant, expr, start_ns=..., end_ns=..., step_ns=...,
                             instant=False, limits=config.limits_config, stats=stats)

and answers ``result.result_type`` / ``result.result`` with ``stats`` (one ``QueryStats``
for log and metric queries). Query-time failures raise ``logql.errors.QueryError`` with
Loki's text (400 at the edge).

Values flow between the evaluators as *step vectors*: a list with one dict per evaluation
step, each mapping a label key (a tuple of ``(name, value)`` pairs sorted by name) to the
sample value at that step. Number literals stay plain floats (``Scalar``) until they meet a
vector. The modules: ``engine_range`` (range aggregations over log lines), ``engine_vector``
(vector aggregations, ``label_replace``), ``engine_binary`` (operators).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from logql.syntax import ast as A
from logql.engine.binary import eval_binary
from logql.engine.common import LabelKey, NS, Scalar, StepVectors, series_limit_error
from logql.engine.range import eval_range_aggregation, eval_summed_counts, eval_summed_rollups
from logql.engine.summed_scan import eval_summed_scan_counts
from logql.engine.vector import eval_label_replace, eval_vector_aggregation, group_fn
from logql.gocompat.format import format_float_f
from logql.engine.results import QueryStats
from logql.errors import QueryError
from logql.reading import Reader

MAX_POINTS = 11000
DEFAULT_MAX_SERIES = 500
ERR_MAX_POINTS = ("exceeded maximum resolution of 11,000 points per time series. "
                  "Try increasing the value of the step parameter")



def format_float(v: float) -> str:
    """Go ``strconv.FormatFloat(v, 'f', -1, 64)``: ``"0.5"``, ``"3"``, ``"NaN"``, ``"+Inf"``."""
    if v.is_integer() and -1e15 < v < 1e15 and (v or math.copysign(1, v) > 0):
        return str(int(v))   # counts: the common case, without the digit-string dance
    return format_float_f(v)


@dataclass
class MetricResult:
    """What the query route needs to answer a metric query.

    ``result`` is JSON-ready exactly as http-api.md §4.1/§4.2 shows: for ``vector`` a list of
    ``{"metric": {...}, "value": [seconds, "value"]}``, for ``matrix`` a list of
    ``{"metric": {...}, "values": [[seconds, "value"], ...]}``, for ``scalar`` the pair
    ``[seconds, "value"]``. ``stats`` holds the counts for the stats object.
    """
    result_type: str
    result: Any
    stats: QueryStats = field(default_factory=QueryStats)

    @property
    def series_returned(self) -> int:
        return 1 if self.result_type == "scalar" else len(self.result)


def default_step_ns(start_ns: int, end_ns: int) -> int:
    """Loki's default step: ``max(floor((end - start) in seconds / 250), 1)`` seconds."""
    return max((end_ns - start_ns) // NS // 250, 1) * NS


def check_resolution(start_ns: int, end_ns: int, step_ns: int) -> None:
    """Loki's request checks of a range query's step (before anything is read)."""
    if step_ns <= 0:
        raise QueryError("zero or negative query resolution step widths are not "
                         "accepted. Try a positive integer")
    if (end_ns - start_ns) // step_ns > MAX_POINTS:
        raise QueryError(ERR_MAX_POINTS)


def plan_steps(start_ns: int, end_ns: int, step_ns: int, instant: bool) -> list[int]:
    """Evaluation times. Range queries are step-aligned as Loki's frontend does it: start
    rounded down and end rounded up to a multiple of ``step`` counted from the epoch."""
    if instant:
        return [end_ns]
    check_resolution(start_ns, end_ns, step_ns)
    start = start_ns - start_ns % step_ns
    end = end_ns if end_ns % step_ns == 0 else end_ns - end_ns % step_ns + step_ns
    if (end - start) // step_ns > MAX_POINTS:
        raise QueryError(ERR_MAX_POINTS)
    return list(range(start, end + 1, step_ns))


def evaluate_metric(reader: Reader, tenant: Any, expr, *, start_ns: int, end_ns: int,
                    step_ns: int, instant: bool, limits=None,
                    stats: QueryStats | None = None) -> MetricResult:
    """Evaluate a parsed metric query (any ``logql.ast.SampleExpr``) over SQLite.

    Range queries (``instant=False``) evaluate at every step from ``start_ns`` to ``end_ns``
    (inclusive, both aligned to ``step_ns``) and return a ``matrix``; instant queries
    evaluate once at ``end_ns`` (pass the ``time`` parameter there; ``start_ns`` and
    ``step_ns`` are ignored) and return a ``vector``, or a ``scalar`` for a number literal.
    ``limits`` is the ``limits_config`` (``max_query_series`` is read, default 500).
    Runs entirely in the calling thread: call it through ``Database.read``.
    Raises ``QueryError(...)`` with Loki's text for the 11,000-point limit, the series
    limit, pipeline errors (``SampleExtractionErr`` ...) and vector-matching errors.
    """
    began = time.perf_counter()
    steps = plan_steps(start_ns, end_ns, step_ns, instant)
    stats = stats if stats is not None else QueryStats()
    value = evaluate_steps(reader, tenant, expr, steps, step_ns if not instant else 0, stats)
    result = format_metric(value, steps, instant=instant, expr=expr, limits=limits,
                           stats=stats)
    stats.exec_time += time.perf_counter() - began
    return result


def evaluate_steps(reader: Reader, tenant: Any, expr, steps: list[int], step_ns: int,
                   stats: QueryStats) -> Scalar | StepVectors:
    """The query's value at each of `steps` (0 for `step_ns` when instant). A step's value
    depends only on the lines of its own range, so a range query's steps may be evaluated
    in parts, in any process, and their values concatenated (services/read/query_pool.py)."""
    ev = Evaluator(reader, tenant, steps, step_ns, stats, root=expr)
    with reader.snapshot():
        return ev.eval(expr)


def format_metric(value: Scalar | StepVectors, steps: list[int], *, instant: bool, expr,
                  limits, stats: QueryStats) -> MetricResult:
    """The JSON result of `evaluate_steps`' value, its series limited by `limits`."""
    max_series = getattr(limits, "max_query_series", None) or DEFAULT_MAX_SERIES
    if isinstance(value, float):
        if instant:
            result = MetricResult("scalar", [_json_time(steps[0]), format_float(value)], stats)
        else:
            values = [[_json_time(t), format_float(value)] for t in steps]
            result = MetricResult("matrix", [{"metric": {}, "values": values}], stats)
    elif instant:
        result = MetricResult("vector", _vector_json(value[0], steps[0], _keeps_order(expr),
                                                     max_series), stats)
    else:
        result = MetricResult("matrix", _matrix_json(value, steps, max_series), stats)
    stats.entries_returned += result.series_returned
    return result


class Evaluator:
    """Walks the AST; every ``eval`` returns a ``Scalar`` (float) or ``StepVectors``."""

    def __init__(self, reader: Reader, tenant: Any, steps: list[int], step_ns: int,
                 stats: QueryStats | None = None, root: Any = None):
        self.reader = reader
        # the query's top node: its groups' order inside a step never shows
        self.root = root
        self.tenant = tenant
        self.steps = steps
        self.step_ns = step_ns
        self.stats = stats if stats is not None else QueryStats()

    def eval(self, node) -> Scalar | StepVectors:
        self.reader.check_deadline()
        if isinstance(node, A.NumberLiteral):
            return float(node.value)
        if isinstance(node, A.VectorExpr):
            return [{(): float(node.value)} for _ in self.steps]
        if isinstance(node, A.RangeAggregation):
            return eval_range_aggregation(self.reader, self.tenant, node, self.steps,
                                          self.stats)
        if isinstance(node, A.VectorAggregation):
            fast = eval_summed_counts(self.reader, self.tenant, node, self.steps, self.stats)
            if fast is None and node is self.root:
                fast = eval_summed_scan_counts(self.reader, self.tenant, node, self.steps,
                                               self.stats)
            if fast is None:
                fast = eval_summed_rollups(self.reader, self.tenant, node, self.steps,
                                           self.stats, group_fn(node.grouping))
            if fast is not None:
                return fast
            return eval_vector_aggregation(node, self.eval(node.expr), self.steps)
        if isinstance(node, A.BinaryOp):
            return eval_binary(node, self.eval(node.lhs), self.eval(node.rhs))
        if isinstance(node, A.LabelReplace):
            return eval_label_replace(node, self.eval(node.expr))
        if isinstance(node, A.LogQuery):
            raise QueryError("log queries are not supported by the metric engine")
        raise TypeError(f"unsupported expression {type(node).__name__}")


# ----------------------------------------------------------------------------- result JSON

def _json_time(t_ns: int) -> int | float:
    """Seconds as a JSON number with up to 3 decimals (Loki truncates to milliseconds)."""
    ms = t_ns // 1_000_000
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def _metric(key: LabelKey) -> dict[str, str]:
    return dict(key)


def _keeps_order(expr) -> bool:
    """True when the query contains ``sort``/``sort_desc``: the instant vector then keeps the
    evaluation order instead of being sorted by labels (spec §7.9)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, A.VectorAggregation):
            if node.op in ("sort", "sort_desc"):
                return True
            stack.append(node.expr)
        elif isinstance(node, A.BinaryOp):
            stack += [node.lhs, node.rhs]
        elif isinstance(node, A.LabelReplace):
            stack.append(node.expr)
    return False


def _vector_json(vec: dict[LabelKey, float], t_ns: int, keep_order: bool,
                 max_series: int) -> list[dict]:
    if len(vec) > max_series:
        raise series_limit_error(max_series)
    keys = list(vec) if keep_order else sorted(vec)
    ts = _json_time(t_ns)
    return [{"metric": _metric(k), "value": [ts, format_float(vec[k])]} for k in keys]


def _matrix_json(steps_vec: StepVectors, steps: list[int], max_series: int) -> list[dict]:
    series: dict[LabelKey, list] = {}
    for t, vec in zip(steps, steps_vec):
        if not vec:
            continue
        ts = _json_time(t)
        for key, value in vec.items():
            points = series.get(key)
            if points is None:
                if len(series) >= max_series:
                    raise series_limit_error(max_series)
                points = series[key] = []
            points.append([ts, format_float(value)])
    return [{"metric": _metric(k), "values": series[k]} for k in sorted(series)]
