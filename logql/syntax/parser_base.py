"""Token cursor and Loki-style syntax errors shared by the parser modules."""

from __future__ import annotations

from logql.errors import ParseError
from logql.syntax.lexer import Token

# Token declaration order of Loki's yacc grammar: "expecting A or B" lists follow it.
TOKEN_ORDER = {k: i for i, k in enumerate((
    "BYTES IDENTIFIER STRING NUMBER FUNCTION_FLAG DURATION RANGE = =~ !~ !> { } [ ] , . |~ |= |> "
    "( ) by without COUNT_OVER_TIME RATE RATE_COUNTER SUM SORT SORT_DESC AVG MAX MIN COUNT "
    "STDDEV STDVAR BOTTOMK TOPK BYTES_OVER_TIME BYTES_RATE bool json regexp logfmt | "
    "line_format label_format unwrap AVG_OVER_TIME SUM_OVER_TIME MIN_OVER_TIME MAX_OVER_TIME "
    "STDVAR_OVER_TIME STDDEV_OVER_TIME QUANTILE_OVER_TIME BYTES_CONV DURATION_CONV "
    "DURATION_SECONDS_CONV FIRST_OVER_TIME LAST_OVER_TIME ABSENT_OVER_TIME VECTOR label_replace "
    "unpack offset pattern ip on ignoring group_left group_right decolorize drop keep "
    "APPROX_TOPK or and unless == != < <= > >= + - * / % ^"
).split())}

MATCH_OPS = ("=", "!=", "=~", "!~")


class ParserBase:
    __slots__ = ("toks", "i", "deferred")

    def __init__(self, toks: list[Token]):
        self.toks = toks
        self.i = 0
        # Errors Loki stores in a node and reports only in the validation pass (after the
        # whole text parsed): id(node) -> ParseError.
        self.deferred: dict[int, ParseError] = {}

    def peek(self) -> Token:
        t = self.toks[self.i]
        if t.kind == "ERROR":
            raise t.value
        return t

    def peek2(self) -> Token:
        """The token after the next one (the next one must not be $end)."""
        t = self.toks[self.i + 1]
        if t.kind == "ERROR":
            raise t.value
        return t

    def advance(self) -> Token:
        t = self.peek()
        self.i += 1
        return t

    def expect(self, kind: str, expected: tuple[str, ...] | None = None) -> Token:
        t = self.peek()
        if t.kind != kind:
            self.unexpected(t, (kind,) if expected is None else expected)
        self.i += 1
        return t

    @staticmethod
    def unexpected(t: Token, expected: tuple[str, ...] = ()):
        msg = "syntax error: unexpected " + t.kind
        if 0 < len(expected) <= 4:
            msg += ", expecting " + " or ".join(
                sorted(set(expected), key=lambda k: TOKEN_ORDER.get(k, 999)))
        raise ParseError(msg, t.line, t.col)
