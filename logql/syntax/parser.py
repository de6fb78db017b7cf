"""Hand-written recursive-descent LogQL parser (spec logql.md §2, §3).

Public API:
    parse_expr(text, *, check_stages=True) -> Expr      full query + every static check
    parse_expr_unvalidated(text) -> Expr                constructor checks only (no §3 pass)
    parse_selector(text, require_non_empty=True) -> StreamSelector

Structure follows Prometheus' promql parser: a token list from ``logql.lexer``, precedence
climbing for binary operators, and one method per grammar rule (pipeline rules live in
``parser_pipeline``). Loki's yacc grammar decides what is accepted; its error texts are
reproduced (``parse error at line L, col C: syntax error: unexpected X[, expecting ...]``).
"""

from __future__ import annotations

import math

from logql.syntax import ast as A
from logql.arith import arith, compare
from logql.syntax.ast import CARD_MANY_TO_ONE, CARD_ONE_TO_MANY, CARD_ONE_TO_ONE
from logql.depth import QUERY_TEXT
from logql.errors import ERR_ONLY_MATCHERS, MAX_INPUT_SIZE, ParseError
from logql.gocompat.format import format_float_6
from logql.syntax.lexer import (
    RANGE_KINDS, VECTOR_KINDS, GoParseError, go_atoi, go_parse_float, tokenize,
)
from logql.syntax.checks import check_stages as _check_stages
from logql.syntax.checks import validate
from logql.syntax.parser_pipeline import PipelineMixin, parse_float_literal
from logql.gocompat.regexp import go_regex_error

# Binary operator precedence, lowest first (Prometheus); all left-assoc except '^'.
_PREC = {"or": 1, "and": 2, "unless": 2, "==": 3, "!=": 3, ">": 3, ">=": 3, "<": 3, "<=": 3,
         "+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "^": 6}
_SET_OPS = frozenset(("and", "or", "unless"))
_GROUPING_OK = frozenset((
    "avg_over_time", "stddev_over_time", "stdvar_over_time", "quantile_over_time",
    "max_over_time", "min_over_time", "first_over_time", "last_over_time"))
_UNWRAP_OK = frozenset((
    "avg_over_time", "sum_over_time", "max_over_time", "min_over_time", "stddev_over_time",
    "stdvar_over_time", "quantile_over_time", "rate", "rate_counter", "absent_over_time",
    "first_over_time", "last_over_time"))
_NO_UNWRAP_OK = frozenset((
    "bytes_over_time", "bytes_rate", "count_over_time", "rate", "absent_over_time"))
_TOPK_LIKE = frozenset(("topk", "bottomk", "approx_topk"))


class Parser(PipelineMixin):
    __slots__ = ()

    # ------------------------------------------------------------------ expressions

    def expr(self, min_prec: int = 1):
        lhs = self.unary()
        while True:
            t = self.peek()
            prec = _PREC.get(t.kind)
            if prec is None or prec < min_prec:
                return lhs
            self.i += 1
            bool_mod, matching = self.bin_modifiers()
            rhs = self.expr(prec if t.kind == "^" else prec + 1)
            lhs = new_binop(t.kind, lhs, rhs, bool_mod, matching)

    def unary(self):
        t = self.peek()
        if t.kind == "+" or t.kind == "-":
            self.i += 1
            n = self.expect("NUMBER")
            return A.NumberLiteral(parse_float_literal(n.value, t.kind == "-"))
        return self.primary()

    def primary(self):
        t = self.peek()
        k = t.kind
        if k == "{":
            sel = self.selector()
            return A.LogQuery(sel, self.pipeline(False))
        if k == "(":
            self.i += 1
            e = self.expr()
            self.expect(")", ())
            return e
        if k == "NUMBER":
            self.i += 1
            return A.NumberLiteral(parse_float_literal(t.value))
        if k in RANGE_KINDS:
            return self.range_aggregation()
        if k in VECTOR_KINDS:
            return self.vector_aggregation()
        if k == "label_replace":
            return self.label_replace()
        if k == "VECTOR":
            self.i += 1
            self.expect("(")
            n = self.expect("NUMBER")
            self.expect(")")
            try:
                return A.VectorExpr(go_parse_float(n.value))
            except GoParseError as e:
                node = A.VectorExpr(math.nan)
                self.deferred[id(node)] = ParseError(
                    "unable to parse vectorExpr as a float: " + str(e))
                return node
        self.unexpected(t)

    def metric_arg(self):
        """An operand that must be a metric expression; a log query there is reported by
        Loki's yacc parser at the token following it."""
        e = self.expr()
        if type(e) is A.LogQuery:
            self.unexpected(self.peek())
        return e

    def bin_modifiers(self):
        bool_mod = False
        if self.peek().kind == "bool":
            self.i += 1
            bool_mod = True
        t = self.peek()
        if t.kind != "on" and t.kind != "ignoring":
            return bool_mod, None
        self.i += 1
        labels = self.label_list()
        card, include = CARD_ONE_TO_ONE, ()
        g = self.peek().kind
        if g == "group_left" or g == "group_right":
            self.i += 1
            card = CARD_MANY_TO_ONE if g == "group_left" else CARD_ONE_TO_MANY
            if self.peek().kind == "(":
                include = self.label_list()
        if t.kind == "ignoring" and not labels and card == CARD_ONE_TO_ONE:
            return bool_mod, None  # ignoring () is the default full-label match
        return bool_mod, A.VectorMatching(t.kind == "on", labels, card, include)

    def label_list(self) -> tuple[str, ...]:
        self.expect("(")
        out: list[str] = []
        if self.peek().kind == ")":
            self.i += 1
            return ()
        while True:
            out.append(self.expect("IDENTIFIER", ("IDENTIFIER", ")") if not out
                                   else ("IDENTIFIER",)).value)
            t = self.advance()
            if t.kind == ")":
                return tuple(out)
            if t.kind != ",":
                self.unexpected(t, (",", ")"))

    def grouping_opt(self) -> A.Grouping | None:
        k = self.peek().kind
        if k != "by" and k != "without":
            return None
        self.i += 1
        return A.Grouping(k == "without", self.label_list())

    # ------------------------------------------------------------------ aggregations

    def range_aggregation(self):
        op = self.advance().kind.lower()
        self.expect("(")
        param = None
        expected: tuple[str, ...] = ("NUMBER", "{", "(")
        if self.peek().kind == "NUMBER":
            param = self.advance().value
            self.expect(",")
            expected = ("{", "(")
        lr = self.log_range(expected)
        self.expect(")", ())
        grouping = self.grouping_opt()
        return self.new_range_aggregation(op, lr, param, grouping)

    def new_range_aggregation(self, op, lr, param_text, grouping):
        err = None
        param = None
        if param_text is not None:
            if op != "quantile_over_time":
                err = f"parameter {param_text} not supported for operation {op}"
            else:
                try:
                    param = go_parse_float(param_text)
                except GoParseError as e:
                    err = f"invalid parameter for operation {op}: {e}"
        elif op == "quantile_over_time":
            err = "parameter required for operation quantile_over_time"
        if err is None:
            if grouping is not None and op not in _GROUPING_OK:
                err = f"grouping not allowed for {op} aggregation"
            elif lr.unwrap is not None:
                if op not in _UNWRAP_OK:
                    err = f"invalid aggregation {op} with unwrap"
            elif op not in _NO_UNWRAP_OK:
                err = f"invalid aggregation {op} without unwrap"
        node = A.RangeAggregation(op, lr, param, grouping)
        if err is not None:
            # Loki keeps these in the node and reports them in the validation pass.
            self.deferred[id(node)] = ParseError(err)
        return node

    def log_range(self, expected: tuple[str, ...]) -> A.LogRange:
        t = self.peek()
        if t.kind == "(":
            self.i += 1
            t2 = self.peek()
            if t2.kind == "(":
                inner = self.log_range(("{", "("))
                self.expect(")", ())
                return inner
            if t2.kind != "{":
                self.unexpected(t2, ("{", "("))
            return self.log_range_rest(self.selector(), True)
        if t.kind == "{":
            return self.log_range_rest(self.selector(), False)
        self.unexpected(t, expected)

    def log_range_rest(self, sel, in_parens: bool) -> A.LogRange:
        rng = None
        off = 0
        if self.peek().kind == "RANGE":
            rng = self.advance().value
            off = self.offset_opt()
        stages = self.pipeline(True)
        unwrap = self.unwrap_opt()
        if rng is None:
            t = self.peek()
            if in_parens and t.kind == ")":
                self.i += 1
                rng = self.expect("RANGE").value
                off = self.offset_opt()
                if not stages and unwrap is None:
                    unwrap = self.unwrap_opt()
                return A.LogRange(A.LogQuery(sel, stages), rng, off, unwrap)
            if t.kind != "RANGE":
                exp: tuple[str, ...] = ()
                if unwrap is not None and not unwrap.post_filters:
                    exp = ("RANGE", "|", ")") if in_parens else ("RANGE", "|")
                self.unexpected(t, exp)
            self.i += 1
            rng = t.value
            off = self.offset_opt()
        if in_parens:
            self.expect(")", ())
        return A.LogRange(A.LogQuery(sel, stages), rng, off, unwrap)

    def offset_opt(self) -> int:
        if self.peek().kind != "offset":
            return 0
        self.i += 1
        return self.expect("DURATION").value

    def vector_aggregation(self):
        op = self.advance().kind.lower()
        grouping = self.grouping_opt()
        prefix = grouping is not None
        self.expect("(")
        param = None
        if self.peek().kind == "NUMBER" and self.peek2().kind == ",":
            param = self.advance().value
            self.i += 1
        operand = self.metric_arg()
        self.expect(")", ())
        if not prefix:
            grouping = self.grouping_opt()
        return new_vector_aggregation(op, operand, grouping, param)

    def label_replace(self):
        self.i += 1
        self.expect("(")
        operand = self.metric_arg()
        args = []
        for _ in range(4):
            self.expect(",")
            args.append(self.expect("STRING").value)
        self.expect(")")
        err = go_regex_error("^(?:" + args[3] + ")$")
        if err is not None:
            raise ParseError("invalid regex in label_replace: " + err)
        return A.LabelReplace(operand, *args)


def new_vector_aggregation(op, operand, grouping, param):
    k = None
    if op in _TOPK_LIKE:
        if param is None:
            raise ParseError(f"parameter required for operation {op}")
        try:
            k = go_atoi(param)
        except GoParseError:
            raise ParseError(f"invalid parameter {op}({param},") from None
        if k <= 0:
            raise ParseError(f"invalid parameter (must be greater than 0) {op}({param}")
        if op == "approx_topk" and grouping is not None:
            raise ParseError("grouping not allowed for approx_topk aggregation")
    elif param is not None:
        raise ParseError(f"unsupported parameter for operation {op}({param},")
    return A.VectorAggregation(op, operand, grouping or A.Grouping(), k)


def new_binop(op, lhs, rhs, bool_mod, matching):
    for leg, side in ((lhs, "left"), (rhs, "right")):
        if type(leg) is A.LogQuery:
            tn = "PipelineExpr" if leg.stages else "MatchersExpr"
            raise ParseError(
                f"unexpected type for {side} leg of binary operation ({op}): *syntax.{tn}")
    lit_l = type(lhs) is A.NumberLiteral
    lit_r = type(rhs) is A.NumberLiteral
    if op in _SET_OPS:
        if lit_l:
            raise ParseError(f"unexpected literal for left leg of logical/set binary operation "
                             f"({op}): {format_float_6(lhs.value)}")
        if lit_r:
            raise ParseError(f"unexpected literal for right leg of logical/set binary operation "
                             f"({op}): {format_float_6(rhs.value)}")
    if lit_l and lit_r:
        return A.NumberLiteral(fold_constants(op, lhs.value, rhs.value))
    return A.BinaryOp(op, lhs, rhs, bool_mod, matching)


def fold_constants(op: str, a: float, b: float) -> float:
    """Loki evaluates literal-only operations at parse time (comparisons give 1 or 0)."""
    if op in ("==", "!=", ">", ">=", "<", "<="):
        return 1.0 if compare(op, a, b) else 0.0
    return arith(op, a, b)


def _parse(text: str):
    if not isinstance(text, str):
        raise ParseError("query must be a string")
    if len(text) * 4 >= MAX_INPUT_SIZE or len(text) >= MAX_INPUT_SIZE:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size >= MAX_INPUT_SIZE:
            raise ParseError(f"input size too long ({size} > {MAX_INPUT_SIZE})")
    p = Parser(tokenize(text))
    e = p.expr()
    p.expect("$end", ())
    return e, p


def parse_expr_unvalidated(text: str):
    """Loki's ``ParseExprWithoutValidation``: syntax and constructor checks only."""
    try:
        return _parse(text)[0]
    except RecursionError:
        raise ParseError(QUERY_TEXT) from None


def parse_expr(text: str, *, check_stages: bool = True):
    """Parse a full LogQL query and run every static check (spec §3). With ``check_stages``
    (default) the checks Loki defers to pipeline build time (line-filter regexes, ``|>``
    patterns, ``ip()`` arguments, label_format targets) are run too."""
    try:
        e, p = _parse(text)
        validate(e, p.deferred)
        if check_stages:
            _check_stages(e)
        return e
    except RecursionError:
        raise ParseError(QUERY_TEXT) from None


def parse_selector(text: str, require_non_empty: bool = True) -> A.StreamSelector:
    """A bare stream selector (label/series APIs). Anything else raises ``ParseError`` with
    the bare message ``only label matchers are supported``. ``require_non_empty=False``
    (series API) skips the non-empty-matcher rule, so ``{}`` and ``{a=~".*"}`` pass."""
    if require_non_empty:
        e = parse_expr(text, check_stages=False)
    else:
        try:
            e, p = _parse(text)
        except RecursionError:
            raise ParseError(QUERY_TEXT) from None
    if type(e) is not A.LogQuery or e.stages:
        raise ParseError(ERR_ONLY_MATCHERS, bare=True)
    return e.selector
