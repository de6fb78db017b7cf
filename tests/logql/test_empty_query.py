"""An empty query is reported as Loki reports it: without a position (Go's text/scanner puts
an empty input at line 0, col 0); any other input that ends too early keeps its position."""

from __future__ import annotations

import json

import pytest

from logql import ParseError, parse_expr

EMPTY = "parse error : syntax error: unexpected $end"


@pytest.fixture(scope="module")
def client(tmp_path_factory, storage_state):
    """One app for the module: every request of it is refused."""
    from tests.conftest import module_client

    with module_client(tmp_path_factory, storage_state) as c:
        yield c


@pytest.mark.parametrize("text, message", [
    ("", EMPTY),
    (" ", "parse error at line 1, col 2: syntax error: unexpected $end"),
    ("\n", "parse error at line 2, col 1: syntax error: unexpected $end"),
    ("# only a comment", "parse error at line 1, col 17: syntax error: unexpected $end"),
])
def test_parse_positions(text, message):
    with pytest.raises(ParseError) as info:
        parse_expr(text)
    assert str(info.value) == message


@pytest.mark.parametrize("path", ["/logstore/api/v1/query", "/logstore/api/v1/query_range",
                                  "/loki/api/v1/query_range"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_query_endpoints(client, path, method):
    if method == "GET":
        r = client.get(path, params={"query": ""})
    else:
        r = client.post(path, data={"query": ""})
    assert (r.status_code, r.text) == (400, EMPTY)


def test_missing_query_parameter_is_an_empty_query(client):
    r = client.get("/logstore/api/v1/query_range")
    assert (r.status_code, r.text) == (400, EMPTY)


def test_format_query(client):
    r = client.get("/logstore/api/v1/format_query", params={"query": ""})
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/json; charset=utf-8"
    assert json.loads(r.text) == {"status": "invalid-query", "error": EMPTY}
