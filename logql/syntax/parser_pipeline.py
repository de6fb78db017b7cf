"""Recursive descent for stream selectors, pipelines, label filters and unwrap (§2.2-2.5)."""

from __future__ import annotations

from logql.syntax import ast as A
from logql.errors import ParseError
from logql.syntax.lexer import GoParseError, go_parse_float
from logql.syntax.parser_base import MATCH_OPS, ParserBase
from logql.syntax.checks import pattern_parser_error, regexp_parser_error
from logql.gocompat.regexp import go_regex_error

LINE_FILTER_OPS = frozenset(("|=", "!=", "|~", "!~", "|>", "!>"))
_NEGATIVE_LINE_OPS = frozenset(("!=", "!~", "!>"))
_CMP_OPS = frozenset(("==", ">", ">=", "<", "<="))
_CONVERSIONS = {"BYTES_CONV": "bytes", "DURATION_CONV": "duration",
                "DURATION_SECONDS_CONV": "duration_seconds"}
_TYPED_START = ("DURATION", "BYTES", "NUMBER", "+", "-")


def parse_float_literal(text: str, negative: bool = False) -> float:
    try:
        v = go_parse_float(text)
    except GoParseError as e:
        raise ParseError("unable to parse literal as a float: " + str(e)) from None
    return -v if negative else v


def new_matcher(name: str, op: str, value: str) -> A.LabelMatcher:
    if op in ("=~", "!~"):
        err = go_regex_error(value)
        if err is not None:
            raise ParseError(err)
    return A.LabelMatcher(name, op, value)


class PipelineMixin(ParserBase):
    __slots__ = ()

    # ------------------------------------------------------------------ selector

    def selector(self) -> A.StreamSelector:
        self.expect("{")
        t = self.peek()
        if t.kind == "}":
            self.i += 1
            return A.StreamSelector(())
        matchers = []
        expected: tuple[str, ...] = ("IDENTIFIER", "}")
        while True:
            matchers.append(self.matcher(expected))
            t = self.peek()
            if t.kind == "}":
                self.i += 1
                return A.StreamSelector(tuple(matchers))
            if t.kind != ",":
                self.unexpected(t, ("}", ","))
            self.i += 1
            expected = ("IDENTIFIER",)

    def matcher(self, expected: tuple[str, ...] = ("IDENTIFIER",)) -> A.LabelMatcher:
        name = self.expect("IDENTIFIER", expected).value
        t = self.advance()
        if t.kind not in MATCH_OPS:
            self.unexpected(t, MATCH_OPS)
        value = self.expect("STRING").value
        return new_matcher(name, t.kind, value)

    # ------------------------------------------------------------------ pipeline

    def pipeline(self, in_range: bool) -> tuple:
        """Stages up to (not including) ``| unwrap`` in a range, or anything else."""
        stages: list = []
        while True:
            t = self.peek()
            k = t.kind
            if k in LINE_FILTER_OPS:
                self.line_filter(stages)
                continue
            if k != "|":
                return tuple(stages)
            t2 = self.peek2()
            if t2.kind == "unwrap" and in_range:
                return tuple(stages)
            self.i += 1
            stages.append(self.stage(t2))

    def line_filter(self, out: list) -> None:
        op = self.advance().kind
        value, ip = self.filter_arg()
        alts = []
        while self.peek().kind == "or":
            self.i += 1
            alts.append(self.filter_arg())
        if op in _NEGATIVE_LINE_OPS:
            # Loki rewrites a negative or-chain into a conjunction: != "a" or "b" ≡ != "a" != "b"
            out.append(A.LineFilter(op, value, ip))
            out.extend(A.LineFilter(op, v, i) for v, i in alts)
        else:
            out.append(A.LineFilter(op, value, ip, tuple(A.LineFilter(op, v, i) for v, i in alts)))

    def filter_arg(self) -> tuple[str, bool]:
        t = self.advance()
        if t.kind == "STRING":
            return t.value, False
        if t.kind == "ip":
            return self.ip_call(), True
        self.unexpected(t, ("STRING", "ip"))

    def ip_call(self) -> str:
        self.expect("(")
        value = self.expect("STRING").value
        self.expect(")")
        return value

    def stage(self, t):
        k = t.kind
        if k == "IDENTIFIER" or k == "(":
            return A.LabelFilterStage(self.lf_or())
        self.i += 1
        if k == "json":
            return A.JsonParser(self.extractions())
        if k == "logfmt":
            strict = keep_empty = False
            while self.peek().kind == "FUNCTION_FLAG":
                if self.advance().value == "--strict":
                    strict = True
                else:
                    keep_empty = True
            return A.LogfmtParser(strict, keep_empty, self.extractions())
        if k == "regexp":
            pattern = self.expect("STRING").value
            err = regexp_parser_error(pattern)
            if err:
                raise ParseError("invalid regexp parser: " + err)
            return A.RegexpParser(pattern)
        if k == "pattern":
            pattern = self.expect("STRING").value
            err = pattern_parser_error(pattern)
            if err:
                raise ParseError("invalid pattern parser: " + err)
            return A.PatternParser(pattern)
        if k == "unpack":
            return A.UnpackParser()
        if k == "line_format":
            return A.LineFormat(self.expect("STRING").value)
        if k == "label_format":
            return A.LabelFormat(self.label_format_items())
        if k == "decolorize":
            return A.Decolorize()
        if k == "drop":
            return A.Drop(self.named_matchers())
        if k == "keep":
            return A.Keep(self.named_matchers())
        self.unexpected(t)

    def extractions(self) -> tuple[A.Extraction, ...]:
        if self.peek().kind != "IDENTIFIER":
            return ()
        out = []
        while True:
            name = self.expect("IDENTIFIER").value
            if self.peek().kind == "=":
                self.i += 1
                out.append(A.Extraction(name, self.expect("STRING").value))
            else:
                out.append(A.Extraction(name, name))
            if self.peek().kind != ",":
                return tuple(out)
            self.i += 1

    def label_format_items(self) -> tuple[A.LabelFormatItem, ...]:
        out = []
        while True:
            dst = self.expect("IDENTIFIER").value
            self.expect("=")
            t = self.advance()
            if t.kind == "IDENTIFIER":
                out.append(A.LabelFormatItem(dst, t.value, True))
            elif t.kind == "STRING":
                out.append(A.LabelFormatItem(dst, t.value, False))
            else:
                self.unexpected(t, ("IDENTIFIER", "STRING"))
            if self.peek().kind != ",":
                return tuple(out)
            self.i += 1

    def named_matchers(self) -> tuple[A.NamedMatcher, ...]:
        out = []
        while True:
            name = self.expect("IDENTIFIER").value
            t = self.peek()
            if t.kind in MATCH_OPS:
                self.i += 1
                value = self.expect("STRING").value
                out.append(A.NamedMatcher(name, new_matcher(name, t.kind, value)))
            else:
                out.append(A.NamedMatcher(name))
            if self.peek().kind != ",":
                return tuple(out)
            self.i += 1

    # ------------------------------------------------------------------ label filters

    def lf_or(self):
        left = self.lf_and()
        while self.peek().kind == "or":
            self.i += 1
            left = A.OrLabelFilter(left, self.lf_and())
        return left

    def lf_and(self):
        left = self.lf_seq()
        while self.peek().kind == "and":
            self.i += 1
            left = A.AndLabelFilter(left, self.lf_seq())
        return left

    def lf_seq(self):
        # ',' and juxtaposition have no precedence in Loki's grammar, so they always shift:
        # the right operand is everything that follows in the stage (spec §2.4).
        p = self.lf_primary()
        k = self.peek().kind
        if k == ",":
            self.i += 1
            return A.AndLabelFilter(p, self.lf_or())
        if k == "IDENTIFIER" or k == "(":
            return A.AndLabelFilter(p, self.lf_or())
        return p

    def lf_primary(self):
        t = self.advance()
        if t.kind == "(":
            e = self.lf_or()
            self.expect(")")
            return e
        if t.kind != "IDENTIFIER":
            self.unexpected(t, ("IDENTIFIER", "("))
        name = t.value
        op_tok = self.advance()
        op = op_tok.kind
        if op in ("=~", "!~"):
            value = self.expect("STRING").value
            return A.StringLabelFilter(name, op, _checked_regex(value))
        if op == "=" or op == "!=":
            v = self.peek()
            if v.kind == "STRING":
                self.i += 1
                return A.StringLabelFilter(name, op, v.value)
            if v.kind == "ip":
                self.i += 1
                return A.IpLabelFilter(name, op, self.ip_call())
            return self.typed_filter(name, "==" if op == "=" else op)
        if op in _CMP_OPS:
            return self.typed_filter(name, op)
        self.unexpected(op_tok)

    def typed_filter(self, name: str, op: str):
        t = self.advance()
        k = t.kind
        if k == "DURATION":
            return A.DurationLabelFilter(name, op, t.value)
        if k == "BYTES":
            return A.BytesLabelFilter(name, op, t.value)
        if k == "NUMBER":
            return A.NumericLabelFilter(name, op, parse_float_literal(t.value))
        if k == "+" or k == "-":
            n = self.expect("NUMBER")
            return A.NumericLabelFilter(name, op, parse_float_literal(n.value, k == "-"))
        self.unexpected(t, _TYPED_START)

    # ------------------------------------------------------------------ unwrap

    def unwrap_opt(self) -> A.Unwrap | None:
        if self.peek().kind != "|" or self.peek2().kind != "unwrap":
            return None
        self.i += 2
        t = self.advance()
        if t.kind == "IDENTIFIER":
            label, conv = t.value, ""
        elif t.kind in _CONVERSIONS:
            conv = _CONVERSIONS[t.kind]
            self.expect("(")
            label = self.expect("IDENTIFIER").value
            self.expect(")")
        else:
            self.unexpected(t, ("IDENTIFIER", "BYTES_CONV", "DURATION_CONV",
                                "DURATION_SECONDS_CONV"))
        post = []
        while self.peek().kind == "|":
            self.i += 1
            post.append(self.lf_or())
        return A.Unwrap(label, conv, tuple(post))


def _checked_regex(value: str) -> str:
    err = go_regex_error(value)
    if err is not None:
        raise ParseError(err)
    return value
