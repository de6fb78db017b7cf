"""Exact AST shapes for representative queries, and the node helpers other modules use."""

import math

import pytest

from logql.syntax import ast as A
from logql.syntax.ast import CARD_MANY_TO_ONE, CARD_ONE_TO_MANY
from logql.syntax.parser import parse_expr

SEL = A.StreamSelector((A.LabelMatcher("a", "=", "b"),))
Q = A.LogQuery(SEL)
M5 = 5 * 60 * 10**9


def lr(stages=(), rng=M5, off=0, unwrap=None):
    return A.LogRange(A.LogQuery(SEL, tuple(stages)), rng, off, unwrap)


def rate(stages=()):
    return A.RangeAggregation("rate", lr(stages))


SHAPES = [
    ('{a="b"}', Q),
    ('{a="b", c!~"d"}', A.LogQuery(A.StreamSelector((
        A.LabelMatcher("a", "=", "b"), A.LabelMatcher("c", "!~", "d"))))),
    ('{a="b"} |= "x" or ip("1.2.3.4") != "y" or "z"', A.LogQuery(SEL, (
        A.LineFilter("|=", "x", False, (A.LineFilter("|=", "1.2.3.4", True),)),
        A.LineFilter("!=", "y"), A.LineFilter("!=", "z")))),
    ('{a="b"} | json x, y="a.b[0]"', A.LogQuery(SEL, (
        A.JsonParser((A.Extraction("x", "x"), A.Extraction("y", "a.b[0]"))),))),
    ('{a="b"} | logfmt --keep-empty --strict x', A.LogQuery(SEL, (
        A.LogfmtParser(True, True, (A.Extraction("x", "x"),)),))),
    ('{a="b"} | regexp "(?P<x>.)" | pattern "<y>" | unpack', A.LogQuery(SEL, (
        A.RegexpParser("(?P<x>.)"), A.PatternParser("<y>"), A.UnpackParser()))),
    ('{a="b"} | line_format "{{.x}}" | label_format y=x, z="{{.x}}" | decolorize',
     A.LogQuery(SEL, (A.LineFormat("{{.x}}"), A.LabelFormat((
         A.LabelFormatItem("y", "x", True), A.LabelFormatItem("z", "{{.x}}", False))),
         A.Decolorize()))),
    ('{a="b"} | drop x, y="1" | keep z=~"q"', A.LogQuery(SEL, (
        A.Drop((A.NamedMatcher("x"), A.NamedMatcher("y", A.LabelMatcher("y", "=", "1")))),
        A.Keep((A.NamedMatcher("z", A.LabelMatcher("z", "=~", "q")),))))),
    ('{a="b"} | x > 1 , y == 2s or z <= 3KB', A.LogQuery(SEL, (A.LabelFilterStage(
        A.AndLabelFilter(A.NumericLabelFilter("x", ">", 1.0), A.OrLabelFilter(
            A.DurationLabelFilter("y", "==", 2 * 10**9), A.BytesLabelFilter("z", "<=", 3000)))),))),
    ('{a="b"} | x = -1.5 and y != ip("::1") and z !~ "w"', A.LogQuery(SEL, (A.LabelFilterStage(
        A.AndLabelFilter(A.AndLabelFilter(A.NumericLabelFilter("x", "==", -1.5),
                                          A.IpLabelFilter("y", "!=", "::1")),
                         A.StringLabelFilter("z", "!~", "w"))),))),
    ('rate({a="b"}[5m])', rate()),
    ('count_over_time({a="b"} |= "x" [1h] offset -30s)', A.RangeAggregation(
        "count_over_time", lr([A.LineFilter("|=", "x")], 3600 * 10**9, -30 * 10**9))),
    ('quantile_over_time(0.9, {a="b"} | unwrap duration(x) | y="" [5m]) by (c)',
     A.RangeAggregation("quantile_over_time", lr(unwrap=A.Unwrap(
         "x", "duration", (A.StringLabelFilter("y", "=", ""),))), 0.9, A.Grouping(False, ("c",)))),
    ('max_over_time({a="b"} | unwrap x [5m]) without ()', A.RangeAggregation(
        "max_over_time", lr(unwrap=A.Unwrap("x")), None, A.Grouping(True, ()))),
    ('sum(rate({a="b"}[5m]))', A.VectorAggregation("sum", rate())),
    ('sum(rate({a="b"}[5m])) by (x, y)',
     A.VectorAggregation("sum", rate(), A.Grouping(False, ("x", "y")))),
    ('topk without (x) (3, rate({a="b"}[5m]))',
     A.VectorAggregation("topk", rate(), A.Grouping(True, ("x",)), 3)),
    ('rate({a="b"}[5m]) > bool 1', A.BinaryOp(">", rate(), A.NumberLiteral(1.0), True)),
    ('rate({a="b"}[5m]) / on (x) group_left (y) rate({a="b"}[5m])', A.BinaryOp(
        "/", rate(), rate(), False, A.VectorMatching(True, ("x",), CARD_MANY_TO_ONE, ("y",)))),
    ('rate({a="b"}[5m]) - ignoring (x) group_right rate({a="b"}[5m])', A.BinaryOp(
        "-", rate(), rate(), False, A.VectorMatching(False, ("x",), CARD_ONE_TO_MANY, ()))),
    ('rate({a="b"}[5m]) + rate({a="b"}[5m]) * 2', A.BinaryOp(
        "+", rate(), A.BinaryOp("*", rate(), A.NumberLiteral(2.0)))),
    ('rate({a="b"}[5m]) ^ 2 ^ 3', A.BinaryOp("^", rate(), A.NumberLiteral(8.0))),
    ('label_replace(vector(2), "d", "$1", "s", "(.*)")',
     A.LabelReplace(A.VectorExpr(2.0), "d", "$1", "s", "(.*)")),
    ('-1.5', A.NumberLiteral(-1.5)),
    ('2 * 3 - 1', A.NumberLiteral(5.0)),
]


@pytest.mark.parametrize("query,tree", SHAPES, ids=[q for q, _ in SHAPES])
def test_shape(query, tree):
    assert parse_expr(query) == tree


def test_nodes_are_immutable_and_hashable():
    e = parse_expr('sum by (a) (rate({a="b"} | json [5m]))')
    with pytest.raises(AttributeError):
        e.op = "avg"  # type: ignore[misc]
    assert hash(e) == hash(parse_expr('sum(rate({a="b"} | json [5m])) by (a)'))
    assert {e: 1}[parse_expr('sum by (a)(rate({a="b"} | json[5m]))')] == 1


@pytest.mark.parametrize("op,value,cases", [
    ("=", "x", {"x": True, "": False, "xy": False}),
    ("!=", "x", {"x": False, "": True}),
    ("=~", "a|b", {"a": True, "b": True, "ab": False, "": False}),
    ("=~", ".*", {"": True, "anything\nwith newline": True}),
    ("=~", "x|", {"": True, "x": True}),
    ("!~", "x", {"": True, "x": False, "xx": True}),
])
def test_label_matcher_matches(op, value, cases):
    m = A.LabelMatcher("n", op, value)
    for v, want in cases.items():
        assert m.matches(v) is want, (op, value, v)


def test_string_label_filter_dot_does_not_match_newline():
    f = A.StringLabelFilter("n", "=~", "a.b")
    assert f.matches("axb")
    assert not f.matches("a\nb")
    assert not A.StringLabelFilter("n", "!~", "a.*").matches("abc")


def test_vector_and_literal_printing():
    assert str(A.VectorExpr(1.0)) == "vector(1.000000)"
    assert str(A.NumberLiteral(1e21)) == "1e+21"
    assert str(A.NumberLiteral(math.inf)) == "+Inf"
    assert str(parse_expr("1 / 0")) == "NaN"
    assert str(parse_expr("0 % 0")) == "NaN"
    assert str(parse_expr("2 ^ 10000")) == "+Inf"
    assert str(parse_expr("0 ^ -1")) == "+Inf"
    assert str(parse_expr("-8 ^ 0.5")) == "NaN"
