"""Table-driven corpus: every valid query prints to its canonical text and round-trips;
every invalid query raises ParseError with Loki's exact message."""

import pytest

from logql.errors import ParseError
from logql.syntax.parser import parse_expr
from tests.logql.corpus_invalid import INVALID
from tests.logql.corpus_valid import LOSSY, VALID


def test_corpus_sizes():
    assert len(VALID) >= 400
    assert len(INVALID) >= 120


@pytest.mark.parametrize("query,canonical", VALID, ids=[q for q, _ in VALID])
def test_valid_query(query, canonical):
    expr = parse_expr(query)
    assert str(expr) == canonical
    again = parse_expr(canonical)
    if query in LOSSY:
        assert str(again) == canonical
    else:
        assert again == expr
    # printing is a fixed point
    assert str(parse_expr(str(again))) == canonical


@pytest.mark.parametrize("query,message", INVALID, ids=[q for q, _ in INVALID])
def test_invalid_query(query, message):
    with pytest.raises(ParseError) as info:
        parse_expr(query)
    assert str(info.value) == message
