"""LogQL: lexer, parser, immutable AST with canonical printing, and ``format_query``.

    from logql import parse_expr, parse_selector, format_query, ParseError
"""

from logql.errors import ParseError
from logql.syntax.parser import parse_expr, parse_expr_unvalidated, parse_selector
from logql.syntax.printer import format_query


__all__ = ["ParseError", "parse_expr", "parse_expr_unvalidated", "parse_selector",
           "format_query"]
