"""Public entry points: parse_selector, format_query (pretty form), size limit, checks."""

import pytest

import logql
from logql import ParseError, format_query, parse_expr, parse_selector
from logql.syntax.ast import LabelMatcher, StreamSelector
from logql.errors import ERR_EMPTY_MATCHERS


def test_parse_selector():
    assert parse_selector('{app="a", env=~"p.*"}') == StreamSelector((
        LabelMatcher("app", "=", "a"), LabelMatcher("env", "=~", "p.*")))
    assert parse_selector('({app="a"})') == StreamSelector((LabelMatcher("app", "=", "a"),))


@pytest.mark.parametrize("q", ['{app="a"} |= "x"', 'rate({app="a"}[5m])', "1", '{app="a"} | json'])
def test_parse_selector_rejects_non_selectors(q):
    with pytest.raises(ParseError) as e:
        parse_selector(q)
    assert str(e.value) == "only label matchers are supported"


def test_parse_selector_empty_matchers():
    with pytest.raises(ParseError) as e:
        parse_selector('{app=~".*"}')
    assert str(e.value) == "parse error : " + ERR_EMPTY_MATCHERS
    # validation comes first, as in Loki's ParseMatchers(validate=true)
    with pytest.raises(ParseError) as e:
        parse_selector('{app=~".*"} |= "x"')
    assert str(e.value) == "parse error : " + ERR_EMPTY_MATCHERS
    assert parse_selector('{app=~".*"}', require_non_empty=False) == StreamSelector((
        LabelMatcher("app", "=~", ".*"),))
    assert parse_selector("{}", require_non_empty=False) == StreamSelector(())
    with pytest.raises(ParseError) as e:
        parse_selector('{app=~".*"} | json', require_non_empty=False)
    assert str(e.value) == "only label matchers are supported"
    with pytest.raises(ParseError) as e:
        parse_selector('{app=~"(x"}', require_non_empty=False)
    assert str(e.value) == "parse error : error parsing regexp: missing closing ): `(x`"


def test_input_size_limit():
    q = '{a="b"} |= "' + "x" * 131060 + '"'
    with pytest.raises(ParseError) as e:
        parse_expr(q)
    assert str(e.value) == f"parse error : input size too long ({len(q)} > 131072)"
    ok = '{a="b"} |= "' + "x" * 131000 + '"'
    assert len(parse_expr(ok).stages[0].value) == 131000


def test_deep_nesting_is_a_parse_error():
    with pytest.raises(ParseError):
        parse_expr("(" * 5000 + "1" + ")" * 5000)
    assert str(parse_expr("(" * 50 + "1" + ")" * 50)) == "1"


def test_build_time_checks_can_be_skipped():
    q = '{a="b"} |~ "(unclosed"'
    with pytest.raises(ParseError) as e:
        parse_expr(q)
    assert str(e.value) == ("parse error : stage '|~ \"(unclosed\"' : error parsing regexp: "
                            "missing closing ): `(unclosed`")
    assert str(parse_expr(q, check_stages=False)) == q
    assert format_query(q) == q


def test_unvalidated_parse_skips_selector_rule():
    assert str(logql.parse_expr_unvalidated("{}")) == "{}"
    assert str(logql.parse_expr_unvalidated('rate({a!="b"}[5m]) by (x)')) == \
        'rate({a!="b"}[5m]) by (x)'


@pytest.mark.parametrize("q,out", [
    ('{foo=   "bar"}', '{foo="bar"}'),
    ('sum(rate({app="foo"}[5m])) by (level)', 'sum by (level)(rate({app="foo"}[5m]))'),
    ('{app="foo"} |= "err" | json | status >= 500 and method="GET"',
     '{app="foo"} |= "err" | json | ( status>=500 , method="GET" )'),
    ('count_over_time({app="foo"}[5m] offset 1h)', 'count_over_time({app="foo"}[5m] offset 1h0m0s)'),
    ('rate({a="b"}[5m]) > bool 2', '(rate({a="b"}[5m]) > bool 2)'),
    ("1 + 1", "2"),
    ('{app="foo"} != "a" or "b"', '{app="foo"} != "a" != "b"'),
    ('{a="b"} | size > 10KB', '{a="b"} | size>10kB'),
    ("vector(1)", "vector(1.000000)"),
    ('{a="b"} |= `x\\y`', '{a="b"} |= "x\\\\y"'),
    ('sum by (cluster, namespace) (rate({namespace="loki-prod", container="query-frontend", '
     'cluster="eu-west"} |= "metrics.go" | logfmt | duration > 10s [5m]))',
     'sum by (cluster, namespace)(\n'
     '  rate(\n'
     '    {namespace="loki-prod", container="query-frontend", cluster="eu-west"}\n'
     '      |= "metrics.go"\n'
     '      | logfmt\n'
     '      | duration>10s [5m]\n'
     '  )\n'
     ')'),
    ('quantile_over_time(0.99, {container="query-frontend", namespace="loki-prod-long-name"} '
     '| json | unwrap duration(latency) | __error__="" [5m] offset 1h) by (path, method)',
     'quantile_over_time(\n'
     '  0.99,\n'
     '  {container="query-frontend", namespace="loki-prod-long-name"} | json\n'
     '    | unwrap duration(latency)\n'
     '    | __error__="" [5m] offset 1h\n'
     ') by (path, method)'),
    ('topk(10, sum by (path, method, status) (rate({app="some-application", env="production"} '
     '|= "GET" [5m]))) / on (path) group_left (method) vector(1)',
     '  topk(10,sum by (path,method,status)(rate({app="some-application", env="production"} '
     '|= "GET"[5m])))\n'
     '/ on (path) group_left (method)\n'
     '  vector(1.000000)'),
    ('topk(10, sum by (path, method, status) (rate({app="some-application", env="production-eu"} '
     '|= "GET" [5m])))',
     'topk(\n'
     '  10,\n'
     '  sum by (path,method,status)(rate({app="some-application", env="production-eu"} '
     '|= "GET"[5m]))\n'
     ')'),
    ('label_replace(sum by (application_name) (rate({application_name="an-application-with-a-'
     'long-name"}[5m])), "dst", "$1", "src", "(.*)")',
     'label_replace(\n'
     '  sum by (application_name)(rate({application_name="an-application-with-a-long-name"}'
     '[5m])),\n'
     '  "dst",\n'
     '  "$1",\n'
     '  "src",\n'
     '  "(.*)"\n'
     ')'),
    ('{app="a-very-long-application-name", namespace="a-very-long-namespace"} |= "a" != "b" '
     '| json | decolorize | line_format "{{.msg}}"',
     '{app="a-very-long-application-name", namespace="a-very-long-namespace"}\n'
     '  |= "a" != "b"\n'
     '  | json\n'
     '| decolorize\n'
     '  | line_format "{{.msg}}"'),
])
def test_format_query(q, out):
    assert format_query(q) == out


def test_format_query_errors():
    with pytest.raises(ParseError) as e:
        format_query("vector(abc)")
    assert str(e.value) == ("parse error at line 1, col 8: syntax error: unexpected IDENTIFIER, "
                            "expecting NUMBER")
