"""Stream selectors for the metadata APIs, read with the LogQL parser."""

from __future__ import annotations

from logql.errors import ParseError
from logql.syntax.parser import parse_selector
from services.runtime.errors import PlainError


def parse_matchers(text: str, require_non_empty: bool = True):
    """The selector's matchers, or a plain-text 400 with the parser's message."""
    try:
        return parse_selector(text, require_non_empty=require_non_empty).matchers
    except ParseError as exc:
        raise PlainError(400, str(exc)) from None
