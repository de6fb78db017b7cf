"""LogQL: lexer, parser, immutable AST with canonical printing, and ``format_query``.

    from logql import parse_expr, parse_selector, format_query, ParseError
"""

from logql.errors import ParseError
from logql.parser import parse_expr, parse_expr_unvalidated, parse_selector


def format_query(text: str) -> str:
    """What Loki's ``/format_query`` answers: the pretty form of the parsed query."""
    from logql.format import format_query as _fq

    return _fq(text)


__all__ = ["ParseError", "parse_expr", "parse_expr_unvalidated", "parse_selector",
           "format_query"]
