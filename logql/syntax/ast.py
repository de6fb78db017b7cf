"""LogQL abstract syntax tree: immutable nodes whose ``str()`` is the canonical query text
(spec logql.md §9.1, what Loki's ``format_query`` prints on one line).

All nodes are ``@dataclass(frozen=True, slots=True)``: hashable, comparable by value, safe to
share and to use as cache keys. Durations are integer nanoseconds. The parser has already
validated everything listed in spec §3 (regexes compile, parameters are legal...).

Log side (this module)
----------------------
``LabelMatcher(name, op, value)``         op ``= != =~ !~``; ``.matches(v)`` = Prometheus
                                          semantics (regex anchored, ``.`` matches newline)
``StreamSelector(matchers)``              ``{a="b", c=~"d"}``; matchers may be empty only
                                          from ``parse_selector(..., require_non_empty=False)``
``LogQuery(selector, stages)``            every log query, with or without a pipeline
Stages (elements of ``LogQuery.stages``):
``LineFilter(op, value, ip, alternatives)``  op ``|= != |~ !~ |> !>``; ``ip`` → value is an
                                          ``ip("...")`` pattern; ``alternatives`` = further
                                          LineFilters (same op) ORed in; only positive ops
                                          have them (``!= "a" or "b"`` is parsed as two
                                          filters). Consecutive filters are separate stages.
``JsonParser(params)``                    params: tuple of ``Extraction(name, expr)``
``LogfmtParser(strict, keep_empty, params)``
``RegexpParser(pattern)``, ``PatternParser(pattern)``, ``UnpackParser()``
``LabelFilterStage(filter)``              ``| <label filter expression>``
``LineFormat(template)``
``LabelFormat(items)``                    items: ``LabelFormatItem(dst, value, rename)``;
                                          ``rename`` → ``value`` is a source label name,
                                          else a template
``Decolorize()``
``Drop(items)``, ``Keep(items)``          items: ``NamedMatcher(name, matcher|None)``
Label filter expressions (inside ``LabelFilterStage`` and ``Unwrap.post_filters``):
``StringLabelFilter(name, op, value)``    op ``= != =~ !~``; ``.matches(v)`` anchored, Go
                                          Perl flags (``.`` does not match newline)
``NumericLabelFilter(name, op, value)``   op ``== != > >= < <=``; value float
``DurationLabelFilter(name, op, value)``  value int ns
``BytesLabelFilter(name, op, value)``     value int bytes
``IpLabelFilter(name, op, pattern)``      op ``=`` or ``!=``
``AndLabelFilter(left, right)``, ``OrLabelFilter(left, right)``
``Unwrap(label, conversion, post_filters)``  conversion ``"" bytes duration duration_seconds``

Metric side (below): ``LogRange``, ``RangeAggregation``,
``Grouping``, ``VectorAggregation``, ``VectorMatching``, ``BinaryOp``, ``LabelReplace``,
``VectorExpr``, ``NumberLiteral``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from logql.gocompat.format import (
    format_float_6, format_float_f, format_float_v, go_duration_str, go_quote, humanize_bytes,
    prom_duration_str,
)
from logql.gocompat.regexp import compile_full, label_regex_is_literal


def value_matches(op: str, value: str, v: str, *, dot_nl: bool) -> bool:
    """The one label matcher: `=`, `!=`, and anchored `=~`/`!~` (Go RE2 syntax)."""
    if op == "=":
        return v == value
    if op == "!=":
        return v != value
    hit = compile_full(value, dot_nl).fullmatch(v) is not None
    return hit if op == "=~" else not hit


@dataclass(frozen=True, slots=True)
class LabelMatcher:
    name: str
    op: str
    value: str

    def __str__(self) -> str:
        return self.name + self.op + go_quote(self.value)

    def matches(self, v: str) -> bool:
        # Prometheus selectors: `.` matches a newline too
        return value_matches(self.op, self.value, v, dot_nl=True)


@dataclass(frozen=True, slots=True)
class StreamSelector:
    matchers: tuple[LabelMatcher, ...]

    def __str__(self) -> str:
        return "{" + ", ".join(map(str, self.matchers)) + "}"


# ----------------------------------------------------------------------------- line filters

@dataclass(frozen=True, slots=True)
class LineFilter:
    op: str
    value: str
    ip: bool = False
    alternatives: tuple["LineFilter", ...] = ()

    def _arg(self) -> str:
        return "ip(" + go_quote(self.value) + ")" if self.ip else go_quote(self.value)

    def __str__(self) -> str:
        s = self.op + " " + self._arg()
        for alt in self.alternatives:
            s += " or " + alt._arg()
        return s


# ----------------------------------------------------------------------------- parsers

@dataclass(frozen=True, slots=True)
class Extraction:
    name: str
    expr: str

    def __str__(self) -> str:
        return self.name + "=" + go_quote(self.expr)


@dataclass(frozen=True, slots=True)
class JsonParser:
    params: tuple[Extraction, ...] = ()

    def __str__(self) -> str:
        if not self.params:
            return "| json"
        return "| json " + ",".join(map(str, self.params))


@dataclass(frozen=True, slots=True)
class LogfmtParser:
    strict: bool = False
    keep_empty: bool = False
    params: tuple[Extraction, ...] = ()

    def __str__(self) -> str:
        s = "| logfmt"
        if self.strict:
            s += " --strict"
        if self.keep_empty:
            s += " --keep-empty"
        if self.params:
            s += " " + ",".join(map(str, self.params))
        return s


@dataclass(frozen=True, slots=True)
class RegexpParser:
    pattern: str

    def __str__(self) -> str:
        return "| regexp " + go_quote(self.pattern)


@dataclass(frozen=True, slots=True)
class PatternParser:
    pattern: str

    def __str__(self) -> str:
        return "| pattern " + go_quote(self.pattern)


@dataclass(frozen=True, slots=True)
class UnpackParser:
    def __str__(self) -> str:
        return "| unpack"


# ----------------------------------------------------------------------------- label filters

@dataclass(frozen=True, slots=True)
class StringLabelFilter:
    name: str
    op: str
    value: str

    def __str__(self) -> str:
        # Loki prints a `=~` regex it cannot reduce to literal matching between backquotes
        # (its regexp filter's String()); a backquote inside keeps the quoted form parseable
        if self.op == "=~" and self.name != "__error__" and "`" not in self.value \
                and not label_regex_is_literal(self.value):
            return f"{self.name}=~`{self.value}`"
        return self.name + self.op + go_quote(self.value)

    def matches(self, v: str) -> bool:
        return value_matches(self.op, self.value, v, dot_nl=False)


@dataclass(frozen=True, slots=True)
class NumericLabelFilter:
    name: str
    op: str
    value: float

    def __str__(self) -> str:
        # "-0" would lex as a DURATION (Go parses "-0" as a duration), so print 0 for -0.0.
        return self.name + self.op + format_float_f(self.value or 0.0)


@dataclass(frozen=True, slots=True)
class DurationLabelFilter:
    name: str
    op: str
    value: int

    def __str__(self) -> str:
        return self.name + self.op + go_duration_str(self.value)


@dataclass(frozen=True, slots=True)
class BytesLabelFilter:
    name: str
    op: str
    value: int

    def __str__(self) -> str:
        # Lossy like Loki's printer (humanize.Bytes): 200MiB prints as 210MB. Zero is the
        # exception: Loki's "0B" does not lex back (0B starts a Go binary literal).
        v = humanize_bytes(self.value) if self.value else "0kB"
        return self.name + self.op + v


@dataclass(frozen=True, slots=True)
class IpLabelFilter:
    name: str
    op: str
    pattern: str

    def __str__(self) -> str:
        return self.name + self.op + "ip(" + go_quote(self.pattern) + ")"


@dataclass(frozen=True, slots=True)
class AndLabelFilter:
    left: "LabelFilterExpr"
    right: "LabelFilterExpr"

    def __str__(self) -> str:
        return "( " + str(self.left) + " , " + str(self.right) + " )"


@dataclass(frozen=True, slots=True)
class OrLabelFilter:
    left: "LabelFilterExpr"
    right: "LabelFilterExpr"

    def __str__(self) -> str:
        return "( " + str(self.left) + " or " + str(self.right) + " )"


LabelFilterExpr = Union[
    StringLabelFilter, NumericLabelFilter, DurationLabelFilter, BytesLabelFilter,
    IpLabelFilter, AndLabelFilter, OrLabelFilter,
]


@dataclass(frozen=True, slots=True)
class LabelFilterStage:
    filter: LabelFilterExpr

    def __str__(self) -> str:
        return "| " + str(self.filter)


# ----------------------------------------------------------------------------- formatting stages

@dataclass(frozen=True, slots=True)
class LineFormat:
    template: str

    def __str__(self) -> str:
        return "| line_format " + go_quote(self.template)


@dataclass(frozen=True, slots=True)
class LabelFormatItem:
    dst: str
    value: str
    rename: bool

    def __str__(self) -> str:
        return self.dst + "=" + (self.value if self.rename else go_quote(self.value))


@dataclass(frozen=True, slots=True)
class LabelFormat:
    items: tuple[LabelFormatItem, ...]

    def __str__(self) -> str:
        return "| label_format " + ",".join(map(str, self.items))


@dataclass(frozen=True, slots=True)
class Decolorize:
    def __str__(self) -> str:
        return "| decolorize"


@dataclass(frozen=True, slots=True)
class NamedMatcher:
    name: str
    matcher: LabelMatcher | None = None

    def __str__(self) -> str:
        return self.name if self.matcher is None else str(self.matcher)


@dataclass(frozen=True, slots=True)
class Drop:
    items: tuple[NamedMatcher, ...]

    def __str__(self) -> str:
        return "| drop " + ",".join(map(str, self.items))


@dataclass(frozen=True, slots=True)
class Keep:
    items: tuple[NamedMatcher, ...]

    def __str__(self) -> str:
        return "| keep " + ",".join(map(str, self.items))


Stage = Union[
    LineFilter, JsonParser, LogfmtParser, RegexpParser, PatternParser, UnpackParser,
    LabelFilterStage, LineFormat, LabelFormat, Decolorize, Drop, Keep,
]


@dataclass(frozen=True, slots=True)
class LogQuery:
    selector: StreamSelector
    stages: tuple[Stage, ...] = ()

    def __str__(self) -> str:
        if not self.stages:
            return str(self.selector)
        return str(self.selector) + " " + " ".join(map(str, self.stages))


@dataclass(frozen=True, slots=True)
class Unwrap:
    label: str
    conversion: str = ""
    post_filters: tuple[LabelFilterExpr, ...] = ()

    def __str__(self) -> str:
        if self.conversion:
            s = " | unwrap " + self.conversion + "(" + self.label + ")"
        else:
            s = " | unwrap " + self.label
        for f in self.post_filters:
            s += " | " + str(f)
        return s


# ----------------------------------------------------------------------------- metric side


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
