"""LogQL parse errors, printed exactly like Loki's ``logqlmodel.ParseError``."""

from __future__ import annotations

MAX_INPUT_SIZE = 131072

ERR_EMPTY_MATCHERS = (
    "queries require at least one regexp or equality matcher that does not have an "
    'empty-compatible value. For instance, app=~".*" does not meet this requirement, '
    'but app=~".+" will'
)
ERR_ONLY_MATCHERS = "only label matchers are supported"


class ParseError(ValueError):
    """A query that Loki would reject with HTTP 400.

    ``line``/``col`` are 1-based; Loki reports line 0 for tokens whose lexing consumed more
    than one scanner step (two-char operators, ranges, durations, bytes, flags), and both 0
    for errors found after the syntax was accepted (printed without a position).
    ``bare`` messages (``only label matchers are supported``) print without any prefix.
    """

    def __init__(self, msg: str, line: int = 0, col: int = 0, *, bare: bool = False):
        super().__init__(msg)
        self.msg = msg
        self.line = line
        self.col = col
        self.bare = bare

    def __str__(self) -> str:
        if self.bare:
            return self.msg
        if self.line == 0 and self.col == 0:
            return f"parse error : {self.msg}"
        return f"parse error at line {self.line}, col {self.col}: {self.msg}"

    def __repr__(self) -> str:
        return f"ParseError({str(self)!r})"


class QueryError(Exception):
    """A query that cannot be answered as asked (a limit, a pipeline error met while
    evaluating, a vector-matching conflict): the request is refused with this text (400)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class StoreUnavailable(RuntimeError):
    """The log store outside the data directory (ClickHouse) could not take or give data:
    unreachable, or it refused the statement. A push is not acknowledged (503), a read
    answers 503; both are worth retrying."""


class QueryTimeout(Exception):
    """The query ran past `query_timeout` (raised by storage reads and the engine; 504)."""


__all__ = ["ParseError", "QueryError", "QueryTimeout", "StoreUnavailable", "MAX_INPUT_SIZE", "ERR_EMPTY_MATCHERS",
           "ERR_ONLY_MATCHERS"]
