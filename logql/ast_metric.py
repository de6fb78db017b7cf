"""Metric-query AST nodes (see the node list in ``logql.ast``).

``LogRange(query, range_ns, offset_ns, unwrap)``          ``{a="b"} | json[5m] offset 1h0m0s``
``Grouping(without, labels)``
``RangeAggregation(op, log_range, param, grouping)``      op e.g. ``rate``; param: float (only
                                                          ``quantile_over_time``); grouping
                                                          None when not written
``VectorAggregation(op, expr, grouping, param)``          grouping always set (``by ()`` when
                                                          not written); param: int k for
                                                          topk/bottomk/approx_topk else None
``VectorMatching(on, labels, card, include)``             card ``one-to-one many-to-one
                                                          one-to-many``
``BinaryOp(op, lhs, rhs, bool_modifier, matching)``       matching None = no on/ignoring
``LabelReplace(expr, dst, replacement, src, regex)``
``VectorExpr(value)``                                     ``vector(1)``
``NumberLiteral(value)``                                  literal (constant folding already
                                                          applied: ``1 + 1`` parses to 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from logql.ast import LogQuery, Unwrap
from logql.format_go import (
    format_float_6, format_float_f, format_float_v, go_duration_str, go_quote,
    prom_duration_str,
)

CARD_ONE_TO_ONE = "one-to-one"
CARD_MANY_TO_ONE = "many-to-one"
CARD_ONE_TO_MANY = "one-to-many"


@dataclass(frozen=True, slots=True)
class LogRange:
    query: LogQuery
    range_ns: int
    offset_ns: int = 0
    unwrap: Unwrap | None = None

    def __str__(self) -> str:
        s = str(self.query)
        if self.unwrap is not None:
            s += str(self.unwrap)
        s += "[" + prom_duration_str(self.range_ns) + "]"
        if self.offset_ns:
            s += " offset " + go_duration_str(self.offset_ns)
        return s


@dataclass(frozen=True, slots=True)
class Grouping:
    without: bool = False
    labels: tuple[str, ...] = ()

    def __str__(self) -> str:
        # Unlike Loki (which prints ``without`` alone), an empty list keeps its parentheses so
        # that the text parses back to the same tree.
        return ("without" if self.without else "by") + " (" + ",".join(self.labels) + ")"

    @property
    def singleton(self) -> bool:
        """True when the aggregation collapses everything into one series (``by ()``)."""
        return not self.without and not self.labels


@dataclass(frozen=True, slots=True)
class RangeAggregation:
    op: str
    log_range: LogRange
    param: float | None = None
    grouping: Grouping | None = None

    def __str__(self) -> str:
        s = self.op + "("
        if self.param is not None:
            s += format_float_f(self.param) + ","
        s += str(self.log_range) + ")"
        if self.grouping is not None:
            s += " " + str(self.grouping)
        return s


@dataclass(frozen=True, slots=True)
class VectorAggregation:
    op: str
    expr: "SampleExpr"
    grouping: Grouping = Grouping()
    param: int | None = None

    def __str__(self) -> str:
        s = self.op
        if not self.grouping.singleton:
            s += " " + str(self.grouping)
        s += "("
        if self.param is not None:
            s += str(self.param) + ","
        return s + str(self.expr) + ")"


@dataclass(frozen=True, slots=True)
class VectorMatching:
    on: bool
    labels: tuple[str, ...] = ()
    card: str = CARD_ONE_TO_ONE
    include: tuple[str, ...] = ()

    def group_text(self, sep: str = ",", force_parens: bool = False) -> str:
        if self.card == CARD_MANY_TO_ONE:
            g = "group_left"
        elif self.card == CARD_ONE_TO_MANY:
            g = "group_right"
        else:
            return ""
        if self.include or force_parens:
            g += " (" + sep.join(self.include) + ")"
        return g


@dataclass(frozen=True, slots=True)
class BinaryOp:
    op: str
    lhs: "SampleExpr"
    rhs: "SampleExpr"
    bool_modifier: bool = False
    matching: VectorMatching | None = None

    def op_text(self, sep: str = ",") -> str:
        op = self.op + " bool" if self.bool_modifier else self.op
        m = self.matching
        if m is not None:
            # A one-to-one match leaves an empty group part: Loki prints two spaces there.
            # A bare group_left before a parenthesised operand would read that operand as its
            # label list, so "()" is written out in that case.
            op += " " + ("on" if m.on else "ignoring") + " (" + sep.join(m.labels) + ") " + \
                m.group_text(sep, type(self.rhs) is BinaryOp)
        return op

    def __str__(self) -> str:
        return "(" + str(self.lhs) + " " + self.op_text() + " " + str(self.rhs) + ")"


@dataclass(frozen=True, slots=True)
class LabelReplace:
    expr: "SampleExpr"
    dst: str
    replacement: str
    src: str
    regex: str

    def __str__(self) -> str:
        return ("label_replace(" + str(self.expr) + "," + go_quote(self.dst) + ","
                + go_quote(self.replacement) + "," + go_quote(self.src) + ","
                + go_quote(self.regex) + ")")


@dataclass(frozen=True, slots=True)
class VectorExpr:
    value: float

    def __str__(self) -> str:
        return "vector(" + format_float_6(self.value) + ")"


@dataclass(frozen=True, slots=True)
class NumberLiteral:
    value: float

    def __str__(self) -> str:
        # Go prints -0.0 as "-0", which its lexer reads as a DURATION; 0 is the same number.
        return format_float_v(self.value or 0.0)


SampleExpr = Union[
    RangeAggregation, VectorAggregation, BinaryOp, LabelReplace, VectorExpr, NumberLiteral,
]
Expr = Union["LogQuery", SampleExpr]
