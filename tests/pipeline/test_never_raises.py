"""No stage may raise on any input line: failures become __error__ labels."""

from hypothesis import given, settings, strategies as st

from logql.pipeline.stages import Pipeline
from logql.pipeline.format import LabelFormat, LineFormat
from logql.pipeline.label_filters import (BytesLabelFilter, Drop, DurationLabelFilter, IpLabelFilter, Keep,
                                 NumericLabelFilter, StringLabelFilter, Unwrap)
from logql.pipeline.line import Decolorize, LineFilter
from logql.pipeline.parsers import JsonParser, LogfmtParser, PatternParser, RegexpParser, UnpackParser

from pipeline_helpers import run

# text biased towards the characters parsers care about
_alphabet = st.sampled_from(list('{}[]":,=\\ -_.ab1\t\n\x1b\u00e9\ud7ff') + ["\\u", "\\ud800", "null", "true"])
lines = st.lists(_alphabet, max_size=40).map("".join)

STAGES = [
    LineFilter("|~", ["a.b"]), LineFilter("|=", [("ip", "1.0.0.0/8")]), LineFilter("|>", ["<_>=<_>"]),
    Decolorize(), JsonParser(), JsonParser([("x", "a.b[0]"), ("y", '["-"]')]), LogfmtParser(),
    LogfmtParser(strict=True, keep_empty=True), LogfmtParser(extractions=[("k", "a")]), RegexpParser("(?P<a>a+)"),
    PatternParser("<a>=<b>"), UnpackParser(), NumericLabelFilter("a", ">", 0), DurationLabelFilter("a", "<", 1),
    BytesLabelFilter("b", ">", 1), IpLabelFilter("a", "=", "1.2.3.4"), StringLabelFilter("a", "=~", "a.*"),
    LineFormat("{{ .a | upper }}{{ __line__ | trunc 3 }}{{ int .b | add 1 }}{{ fromJson __line__ }}"),
    LabelFormat([("c", "a", False), ("d", "{{ substr 1 2 .a }}{{ .b | b64dec }}", True)]),
    Drop(["a"]), Keep(["b", "c"]),
]


@settings(max_examples=300, deadline=None)
@given(lines)
def test_no_stage_raises(line):
    for stage in STAGES:
        out, labels = run([stage], line, stream={"app": "x"}, sm={"a": line[:5], "b": line[-5:]})
        assert out is None or isinstance(out, str)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        for v in labels.values():
            v.encode("utf-8")  # no lone surrogates reach the response encoder
    out, _ = run(STAGES, line)
    assert out is None or isinstance(out, str)


@settings(max_examples=200, deadline=None)
@given(lines)
def test_unwrap_never_raises(line):
    from logql.pipeline.builder import LabelsBuilder
    lb = LabelsBuilder({"app": "x"})
    for conv in ("", "bytes", "duration"):
        lb.reset({"v": line})
        value = Unwrap("v", conv).extract(0, line, lb)
        assert value is None or isinstance(value, float)
    assert Pipeline([LogfmtParser(), JsonParser()]).process(0, line, lb.reset()) == line
