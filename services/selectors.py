"""Stream selectors for the metadata APIs, read with the LogQL parser."""

from __future__ import annotations

from services.errors import PlainError
from logql.matchers import SelectorError, parse_selector


def parse_matchers(text: str, require_non_empty: bool = True):
    try:
        return parse_selector(text, require_non_empty=require_non_empty)
    except SelectorError as exc:
        raise PlainError(400, str(exc)) from None
