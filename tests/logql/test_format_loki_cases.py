"""format_query prints long queries as Loki's printer (syntax.Prettify) does: the cases of
Loki's own prettier tests (at its test width of 20 characters) and the differences found
when logstore was compared with Loki on long queries."""

from __future__ import annotations

import pytest

import logql.syntax.printer as printer
from logql import parse_expr
from logql.syntax.printer import format_query
from logql.gocompat.regexp import label_regex_is_literal

# Loki's pkg/logql/syntax/prettier_test.go, which sets maxCharsPerLine = 20
LOKI_CASES = [
    ('{job="loki", instance="localhost"}', '{job="loki", instance="localhost"}'),
    ('{job="loki", instance="localhost"}|logfmt|level="error" ',
     '{job="loki", instance="localhost"}\n  | logfmt\n  | level="error"'),
    ('count_over_time({job="loki", instance="localhost"}|logfmt[1m])',
     'count_over_time(\n  {job="loki", instance="localhost"}\n    | logfmt [1m]\n)'),
    ('count_over_time({job="loki", instance="localhost"}|= "error" != "memcached" '
     '|= ip("192.168.0.1") |logfmt[1m])',
     'count_over_time(\n  {job="loki", instance="localhost"}\n    |= "error"\n'
     '    != "memcached"\n    |= ip("192.168.0.1")\n    | logfmt [1m]\n)'),
]


@pytest.mark.parametrize("query, expected", LOKI_CASES)
def test_loki_prettier_cases(monkeypatch, query, expected):
    monkeypatch.setattr(printer, "MAX_CHARS", 20)
    assert format_query(query) == expected


LONG = [
    # the unwrap of a split range aggregation goes on its own line, even when the log
    # range would fit on one
    ('quantile_over_time(0.99, {job="app", cluster="eu-west-1", namespace="production"} '
     '| logfmt | unwrap latency_ms [5m]) by (host)',
     'quantile_over_time(\n'
     '  0.99,\n'
     '  {job="app", cluster="eu-west-1", namespace="production"} | logfmt\n'
     '    | unwrap latency_ms [5m]\n'
     ') by (host)'),
    # a space between the pipeline and its range
    ('sum by (host) (count_over_time({job="app", cluster="eu-west-1"} | regexp '
     '"(?P<ip>\\\\S+) (?P<method>\\\\S+) (?P<path>\\\\S+)" [5m]))',
     'sum by (host)(\n'
     '  count_over_time(\n'
     '    {job="app", cluster="eu-west-1"} | regexp "(?P<ip>\\\\S+) (?P<method>\\\\S+) '
     '(?P<path>\\\\S+)" [5m]\n'
     '  )\n'
     ')'),
    # regex label filters Loki cannot match literally print between backquotes
    ('{job="app", cluster="eu-west-1", namespace="production"} | logfmt | '
     'level=~"err.*|warn" | path=~"/api/v[0-9]+/.*" | host!~"test.*"',
     '{job="app", cluster="eu-west-1", namespace="production"}\n'
     '  | logfmt\n'
     '  | level=~"err.*|warn"\n'
     '  | path=~`/api/v[0-9]+/.*`\n'
     '  | host!~"test.*"'),
    # a one-to-one `on (...)` is followed by a space, as Loki writes the group modifier
    ('sum by (job) (rate({job="app", cluster="eu-west-1"} |= "error" [5m])) / on (job) '
     'sum by (job) (rate({job="app", cluster="eu-west-1"}[5m]))',
     '  sum by (job)(rate({job="app", cluster="eu-west-1"} |= "error"[5m]))\n'
     '/ on (job) \n'
     '  sum by (job)(rate({job="app", cluster="eu-west-1"}[5m]))'),
    ('sum by (job) (rate({job="app", cluster="eu-west-1"} |= "error" [5m])) / ignoring '
     '(level) group_left sum by (job) (rate({job="app", cluster="eu-west-1"}[5m]))',
     '  sum by (job)(rate({job="app", cluster="eu-west-1"} |= "error"[5m]))\n'
     '/ ignoring (level) group_left\n'
     '  sum by (job)(rate({job="app", cluster="eu-west-1"}[5m]))'),
]


@pytest.mark.parametrize("query, expected", LONG)
def test_long_queries_print_as_loki_prints_them(client, query, expected):
    r = client.get("/loki/api/v1/format_query", params={"query": query})
    assert r.status_code == 200
    assert r.json() == {"status": "success", "data": expected}
    # the pretty form is a query again, with the same meaning
    assert parse_expr(expected) == parse_expr(query)


@pytest.mark.parametrize("regex, literal", [
    ("foo", True), ("foo|bar", True), ("GET|POST", True), ("error|err", True),
    ("(foo|bar)", True), (".*foo.*", True), ("foo.*", True), ("err.*|warn", True),
    ("(?i)foo", True), ("", True), (".*", True), (".+", True),
    # Go factors these into character classes: `[a-b]`, `ab[c-d]`, `f[a-o]|bar`
    ("a|b", False), ("abc|abd", False), ("fo|fa|bar", False),
    ("\\d+", False), ("a.b", False), ("/api/v[0-9]+/.*", False), ("a\\.*", False),
])
def test_which_label_regexes_loki_matches_literally(regex, literal):
    assert label_regex_is_literal(regex) is literal


def test_only_matching_regex_filters_take_backquotes():
    assert str(parse_expr('{a="b"} | x=~"\\\\d+" | y!~"\\\\d+" | __error__=~"\\\\d+"')) == \
        '{a="b"} | x=~`\\d+` | y!~"\\\\d+" | __error__=~"\\\\d+"'
    # a backquote inside cannot be written between backquotes: stays double-quoted
    assert str(parse_expr('{a="b"} | x=~"a`+"')) == '{a="b"} | x=~"a`+"'
