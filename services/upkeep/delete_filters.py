"""What a delete request hides from reads, apart from the requests' bookkeeping
(services/upkeep/deletes.py): a pending piece as plain data, its query checked and compiled,
and the pieces that match a stream. The query worker processes filter their reads with
these and need not import the event loop's machinery with the rest.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

from logql import ParseError, parse_expr
from logql.plan import compile_log_query
from logql.syntax import ast as A
from services.runtime.errors import PlainError


def bad_request(message: str) -> PlainError:
    return PlainError(400, message, newline=True)


@dataclass(frozen=True)
class ActiveFilter:
    """One piece of a pending request, as plain data: a read in a worker process is sent
    these (services/read/readers.py) and compiles them there."""
    tenant: str
    query: str
    start: int
    end: int


@functools.lru_cache(maxsize=256)
def compiled_delete(query: str) -> tuple[tuple, Callable[[str], bool]]:
    """A request's selector matchers and its line predicate."""
    expr = parse_delete_query(query)
    return tuple(expr.selector.matchers), compile_log_query(expr).pipeline.match_line


def filters_matching(filters: Sequence[ActiveFilter], labels: dict[str, str]
                     ) -> list[tuple[int, int, Callable[[str], bool]]]:
    """(start, end, line predicate) of each of `filters` whose selector matches `labels`."""
    out = []
    for f in filters:
        matchers, pick = compiled_delete(f.query)
        if all(m.matches(labels.get(m.name, "")) for m in matchers):
            out.append((f.start, f.end, pick))
    return out


def parse_delete_query(text: str) -> A.LogQuery:
    try:
        expr = parse_expr(text)
    except ParseError:
        raise bad_request("invalid query expression") from None
    if not isinstance(expr, A.LogQuery) or \
            not all(isinstance(s, A.LineFilter) for s in expr.stages):
        raise bad_request("invalid query expression")
    return expr
