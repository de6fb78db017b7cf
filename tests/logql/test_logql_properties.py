"""Property tests: random ASTs print and parse back to themselves; random text and random
mutations of valid queries never raise anything but ParseError."""

import math
import os

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from logql.syntax import ast as A
from logql.syntax.ast import CARD_MANY_TO_ONE, CARD_ONE_TO_MANY, CARD_ONE_TO_ONE
from logql.errors import ParseError
from logql.syntax.printer import format_query, pretty
from logql.syntax.lexer import KEYWORDS
from logql.syntax.parser import parse_expr
from tests.logql.corpus_invalid import INVALID
from tests.logql.corpus_valid import VALID

# LOGQL_HYPOTHESIS_EXAMPLES raises the budget for a longer local hunt.
SETTINGS = settings(max_examples=int(os.environ.get("LOGQL_HYPOTHESIS_EXAMPLES", "300")),
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ------------------------------------------------------------------------------ strategies

names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s.lower() not in KEYWORDS)
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
regexes = st.sampled_from(["", ".*", ".+", "a|b", "(?i)foo", "x[0-9]+", "\\d{2,3}", "[^a]",
                           "(?P<name>\\w+)", "é.?", "a\\.b"])
ops_match = st.sampled_from(["=", "!=", "=~", "!~"])


@st.composite
def matchers(draw, name=None):
    n = draw(names) if name is None else name
    op = draw(ops_match)
    v = draw(regexes) if op in ("=~", "!~") else draw(texts)
    return A.LabelMatcher(n, op, v)


@st.composite
def selectors(draw):
    first = A.LabelMatcher(draw(names), "=", draw(texts.filter(bool)))
    rest = draw(st.lists(matchers(), max_size=3))
    ms = [first] + rest
    draw(st.randoms()).shuffle(ms)
    return A.StreamSelector(tuple(ms))


@st.composite
def line_filters(draw):
    op = draw(st.sampled_from(["|=", "!=", "|~", "!~", "|>", "!>"]))
    ip = op in ("|=", "!=") and draw(st.booleans())
    value = draw(regexes) if op in ("|~", "!~") else draw(texts)
    alts = ()
    if op in ("|=", "|~", "|>"):
        alts = tuple(A.LineFilter(op, draw(regexes) if op == "|~" else draw(texts),
                                  op == "|=" and draw(st.booleans()))
                     for _ in range(draw(st.integers(0, 2))))
    return A.LineFilter(op, value, ip, alts)


finite = st.floats(allow_nan=False, allow_infinity=False)
exact_bytes = st.one_of(st.integers(0, 9), st.builds(
    lambda k, e: k * 1000 ** e, st.integers(1, 999), st.integers(1, 5)))
cmp_ops = st.sampled_from(["==", "!=", ">", ">=", "<", "<="])
durations = st.integers(-(2**63), 2**63 - 1)


@st.composite
def label_filter_leaf(draw):
    n = draw(names)
    kind = draw(st.integers(0, 4))
    if kind == 0:
        op = draw(ops_match)
        return A.StringLabelFilter(n, op, draw(regexes) if op in ("=~", "!~") else draw(texts))
    if kind == 1:
        return A.NumericLabelFilter(n, draw(cmp_ops), draw(finite))
    if kind == 2:
        return A.DurationLabelFilter(n, draw(cmp_ops), draw(durations))
    if kind == 3:
        return A.BytesLabelFilter(n, draw(cmp_ops), draw(exact_bytes))
    return A.IpLabelFilter(n, draw(st.sampled_from(["=", "!="])), draw(texts))


label_filters = st.recursive(
    label_filter_leaf(),
    lambda inner: st.one_of(st.builds(A.AndLabelFilter, inner, inner),
                            st.builds(A.OrLabelFilter, inner, inner)),
    max_leaves=5)


@st.composite
def extractions(draw):
    return tuple(A.Extraction(draw(names), draw(texts)) for _ in range(draw(st.integers(0, 3))))


@st.composite
def stages(draw):
    kind = draw(st.integers(0, 11))
    if kind == 0:
        return draw(line_filters())
    if kind == 1:
        return A.JsonParser(draw(extractions()))
    if kind == 2:
        return A.LogfmtParser(draw(st.booleans()), draw(st.booleans()), draw(extractions()))
    if kind == 3:
        return A.RegexpParser(draw(st.sampled_from(["(?P<a>x)", "(?P<b>\\d+) (?P<c>.*)"])))
    if kind == 4:
        return A.PatternParser(draw(st.sampled_from(["<a>", "<_> <b> x", "[<c>] <_>"])))
    if kind == 5:
        return A.UnpackParser()
    if kind == 6:
        return A.LabelFilterStage(draw(label_filters))
    if kind == 7:
        return A.LineFormat(draw(texts))
    if kind == 8:
        items = []
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                items.append(A.LabelFormatItem(draw(names), draw(names), True))
            else:
                items.append(A.LabelFormatItem(draw(names), draw(texts), False))
        return A.LabelFormat(tuple(items))
    if kind == 9:
        return A.Decolorize()
    items = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(names)
        items.append(A.NamedMatcher(n, draw(st.one_of(st.none(), matchers(n)))))
    return (A.Drop if kind == 10 else A.Keep)(tuple(items))


def _ambiguous(stages_):
    """``| drop a`` followed by ``!= "x"`` reads as the matcher ``a!="x"`` (in Loki too), so
    that tree has no text of its own."""
    for a, b in zip(stages_, stages_[1:]):
        if type(a) in (A.Drop, A.Keep) and a.items[-1].matcher is None and \
                type(b) is A.LineFilter and b.op in ("!=", "!~"):
            return True
    return False


@st.composite
def log_queries(draw):
    st_ = tuple(draw(st.lists(stages(), max_size=4)))
    assume(not _ambiguous(st_))
    return A.LogQuery(draw(selectors()), st_)


NO_UNWRAP = ["count_over_time", "bytes_over_time", "bytes_rate", "rate", "absent_over_time"]
UNWRAP = ["avg_over_time", "sum_over_time", "max_over_time", "min_over_time", "stddev_over_time",
          "stdvar_over_time", "quantile_over_time", "rate", "rate_counter", "absent_over_time",
          "first_over_time", "last_over_time"]
GROUPABLE = {"avg_over_time", "stddev_over_time", "stdvar_over_time", "quantile_over_time",
             "max_over_time", "min_over_time", "first_over_time", "last_over_time"}
label_lists = st.lists(names, max_size=3).map(tuple)


@st.composite
def range_aggs(draw):
    unwrap = None
    if draw(st.booleans()):
        op = draw(st.sampled_from(UNWRAP))
        unwrap = A.Unwrap(draw(names), draw(st.sampled_from(["", "bytes", "duration",
                                                              "duration_seconds"])),
                          tuple(draw(st.lists(label_filters, max_size=2))))
    else:
        op = draw(st.sampled_from(NO_UNWRAP))
    rng = draw(st.integers(0, 10**12)) * 1_000_000
    # the pretty form prints offsets in Prometheus' millisecond format (spec §9.2)
    off = draw(st.one_of(st.just(0), st.integers(-(2**63 // 10**6), (2**63 - 1) // 10**6)))
    off *= 1_000_000
    lr = A.LogRange(draw(log_queries()), rng, off, unwrap)
    param = draw(st.floats(0, 1)) if op == "quantile_over_time" else None
    grouping = None
    if op in GROUPABLE and draw(st.booleans()):
        grouping = A.Grouping(draw(st.booleans()), draw(label_lists))
    return A.RangeAggregation(op, lr, param, grouping)


def _vector_agg(op, inner, grouping, k):
    return A.VectorAggregation(op, inner, grouping, k)


@st.composite
def vector_aggs(draw, inner):
    op = draw(st.sampled_from(["sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk",
                               "bottomk", "sort", "sort_desc", "approx_topk"]))
    k = draw(st.integers(1, 2**63 - 1)) if op in ("topk", "bottomk", "approx_topk") else None
    grouping = A.Grouping()
    if op not in ("approx_topk", "sort", "sort_desc"):
        grouping = A.Grouping(draw(st.booleans()), draw(label_lists))
    elif op != "approx_topk" and draw(st.booleans()):
        grouping = A.Grouping(True, ())
    return A.VectorAggregation(op, draw(inner), grouping, k)


@st.composite
def binops(draw, inner):
    op = draw(st.sampled_from(["+", "-", "*", "/", "%", "^", "==", "!=", ">", ">=", "<", "<=",
                               "and", "or", "unless"]))
    lhs, rhs = draw(inner), draw(inner)
    lit_l, lit_r = type(lhs) is A.NumberLiteral, type(rhs) is A.NumberLiteral
    assume(not (lit_l and lit_r))
    assume(op not in ("and", "or", "unless") or not (lit_l or lit_r))
    matching = None
    if draw(st.booleans()):
        on = draw(st.booleans())
        card = draw(st.sampled_from([CARD_ONE_TO_ONE, CARD_MANY_TO_ONE, CARD_ONE_TO_MANY]))
        labels = draw(label_lists)
        include = draw(label_lists) if card != CARD_ONE_TO_ONE else ()
        if on or labels or card != CARD_ONE_TO_ONE:
            matching = A.VectorMatching(on, labels, card, include)
    return A.BinaryOp(op, lhs, rhs, draw(st.booleans()), matching)


leaves = st.one_of(
    range_aggs(),
    st.builds(A.VectorExpr, st.integers(0, 10**9).map(lambda i: i / 1000)),
    st.builds(A.NumberLiteral, finite.filter(lambda v: not math.isinf(v))),
)
sample_exprs = st.recursive(
    leaves,
    lambda inner: st.one_of(
        vector_aggs(inner), binops(inner),
        st.builds(A.LabelReplace, inner, texts, texts, texts, regexes)),
    max_leaves=4)
exprs = st.one_of(log_queries(), sample_exprs)


# ------------------------------------------------------------------------------ properties

@SETTINGS
@given(durations)
def test_any_offset_round_trips_in_canonical_form(off):
    e = A.RangeAggregation("rate", A.LogRange(
        A.LogQuery(A.StreamSelector((A.LabelMatcher("a", "=", "b"),))), 60 * 10**9, off))
    assert parse_expr(str(e)) == e


@SETTINGS
@given(exprs)
def test_random_ast_round_trips(e):
    text = str(e)
    assert parse_expr(text, check_stages=False) == e
    # the pretty form parses to the same tree too
    assert parse_expr(pretty(e), check_stages=False) == e


ALPHABET = st.sampled_from(list('{}()[]=!~|><"`,.+-*/%^#@ \n\tabcxyz019_') + [
    "rate", "sum", "by", "without", "json", "logfmt", "unwrap", "offset", "or", "and",
    " bool ", "on", "group_left", "vector", "label_replace", "ip", "5m", "1KB", "--strict",
    "\\", "\u00e9", "\udcff", "bytes(", "topk(", "[5m]", '"x"', "0x", "1e"])


def _only_parse_errors(text):
    try:
        e = parse_expr(text)
    except ParseError as err:
        assert str(err).startswith(("parse error", "only label"))
        return
    str(e)
    format_query(str(e)) if not _has_nonfinite(str(e)) else None


def _has_nonfinite(s):
    return "NaN" in s or "Inf" in s


@SETTINGS
@given(st.text(max_size=60))
def test_random_text_only_raises_parse_error(text):
    _only_parse_errors(text)


@SETTINGS
@given(st.lists(ALPHABET, max_size=30).map("".join))
def test_random_token_soup_only_raises_parse_error(text):
    _only_parse_errors(text)


CORPUS = [q for q, _ in VALID] + [q for q, _ in INVALID]


@st.composite
def mutations(draw):
    q = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 3))
        pos = draw(st.integers(0, len(q)))
        if kind == 0:
            q = q[:pos] + q[pos + 1:]
        elif kind == 1:
            q = q[:pos] + draw(ALPHABET) + q[pos:]
        elif kind == 2:
            q = q[:pos]
        else:
            end = draw(st.integers(pos, len(q)))
            q = q[:pos] + q[end:pos + (end - pos) * 2] + q[end:]
    return q


@SETTINGS
@given(mutations())
def test_mutated_queries_only_raise_parse_error(text):
    _only_parse_errors(text)
