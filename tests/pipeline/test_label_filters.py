import math
import re

import pytest

from logql.gocompat.filters import PipelineError
from logql.gocompat.values import go_parse_float as parse_go_float, parse_bytes, parse_go_duration
from logql.pipeline.label_filters import (And, BytesLabelFilter, Drop, DurationLabelFilter, IpLabelFilter, Keep,
                                 NumericLabelFilter, Or, StringLabelFilter, Unwrap)
from logql.pipeline.parsers import JsonParser, LogfmtParser
from logql.pipeline.builder import LabelsBuilder

from pipeline_helpers import loghub_lines, run


@pytest.mark.parametrize("op,value,label,expected", [
    ("=", "api", "api", True), ("=", "api", "web", False), ("=", "", None, True),
    ("!=", "api", None, True), ("=~", "a.*", "api", True), ("=~", "p", "api", False),   # anchored
    ("=~", "api|web", "web", True), ("!~", "api|web", "web", False), ("=~", ".*", "a\nb", False),
    ("=~", ".+", "", False), ("=~", "(?i)API", "api", True), ("=~", "", None, True), ("!~", ".+", None, True),
])
def test_string_filter(op, value, label, expected):
    stream = {} if label is None else {"app": label}
    out, _ = run(StringLabelFilter("app", op, value), "line", stream=stream)
    assert (out == "line") is expected


def test_string_filter_invalid_regex():
    with pytest.raises(PipelineError, match=r"^error parsing regexp: missing closing \): `\(bar`$"):
        StringLabelFilter("a", "=~", "(bar")


def test_error_details_invisible_to_label_filters():
    stages = [JsonParser(), StringLabelFilter("__error_details__", "=", "")]
    out, labels = run(stages, "bad")
    assert out == "bad" and labels["__error__"] == "JSONParserErr"
    stages = [JsonParser(), StringLabelFilter("__error__", "=", "JSONParserErr")]
    assert run(stages, "bad")[0] == "bad"


@pytest.mark.parametrize("op,value,label,expected", [
    (">", 300, "404", True), (">=", 404, "404", True), ("<", 1, "0.5", True), ("==", 1000, "1e3", True),
    ("=", 5, "+5", True), ("!=", 5, "5.0", False), ("<=", 0, "-Inf", True), (">", 0, "NaN", False),
    ("!=", 0, "NaN", True), (">", 1, "0x1p3", True),
])
def test_numeric_filter(op, value, label, expected):
    out, labels = run(NumericLabelFilter("status", op, value), "l", stream={"status": label})
    assert (out == "l") is expected
    assert "__error__" not in labels


def test_numeric_filter_missing_label_drops_and_bad_value_errors():
    assert run(NumericLabelFilter("status", ">", 1), "l")[0] is None
    out, labels = run(NumericLabelFilter("status", ">", 1), "l", stream={"status": "abc"})
    assert out == "l"
    assert labels == {"status": "abc", "__error__": "LabelFilterErr",
                      "__error_details__": 'strconv.ParseFloat: parsing "abc": invalid syntax'}
    # an earlier error is kept
    out, labels = run([JsonParser(), NumericLabelFilter("x", ">", 1)], "notjson", stream={"x": "abc"})
    assert labels["__error__"] == "JSONParserErr"
    # typed filters on __error__ drop everything
    assert run([JsonParser(), NumericLabelFilter("__error__", "!=", 1)], "notjson")[0] is None


def test_duration_filter():
    f = DurationLabelFilter("latency", ">", parse_go_duration("250ms"))
    assert run(f, "l", stream={"latency": "1.5s"})[0] == "l"
    assert run(f, "l", stream={"latency": "100ms"})[0] is None
    assert run(f, "l", stream={"latency": "1h0.5m"})[0] == "l"
    out, labels = run(f, "l", stream={"latency": "2weeeeee"})
    assert out == "l" and labels["__error_details__"] == 'time: unknown unit "weeeeee" in duration "2weeeeee"'
    assert run(f, "l", stream={"latency": "2d"})[1]["__error_details__"] == 'time: unknown unit "d" in duration "2d"'
    assert run(f, "l", stream={"latency": "5"})[1]["__error_details__"] == 'time: missing unit in duration "5"'


def test_bytes_filter():
    f = BytesLabelFilter("size", ">=", parse_bytes("10MB"))
    assert run(f, "l", stream={"size": "10MB"})[0] == "l"
    assert run(f, "l", stream={"size": "9.9 MB"})[0] is None
    assert run(f, "l", stream={"size": "10MiB"})[0] == "l"
    assert run(f, "l", stream={"size": "20000000"})[0] == "l"
    assert run(f, "l", stream={"size": "5qb"})[1]["__error_details__"] == "unhandled size name: qb"


def test_ip_label_filter():
    f = IpLabelFilter("addr", "=", "10.0.0.0/8")
    assert run(f, "l", stream={"addr": "10.2.3.4"})[0] == "l"
    assert run(f, "l", stream={"addr": "11.2.3.4"})[0] is None
    assert run(f, "l")[0] is None
    assert run(IpLabelFilter("addr", "!=", "10.0.0.0/8"), "l", stream={"addr": "11.2.3.4"})[0] == "l"
    # a line that already has an error passes any ip filter
    assert run([JsonParser(), f], "bad", stream={"addr": "11.2.3.4"})[0] == "bad"
    with pytest.raises(PipelineError, match="^ip: invalid operation$"):
        IpLabelFilter("addr", ">", "1.2.3.4")


def test_and_evaluates_both_or_short_circuits():
    bad_a = NumericLabelFilter("a", ">", 1)
    bad_b = DurationLabelFilter("b", ">", 1)
    out, labels = run(And(bad_a, bad_b), "l", stream={"a": "x", "b": "y"})
    assert out == "l" and labels["__error_details__"] == 'strconv.ParseFloat: parsing "x": invalid syntax'
    yes = StringLabelFilter("a", "=", "x")
    out, labels = run(Or(yes, bad_b), "l", stream={"a": "x", "b": "y"})
    assert out == "l" and "__error__" not in labels
    assert run(And(yes, StringLabelFilter("b", "=", "z")), "l", stream={"a": "x", "b": "y"})[0] is None
    assert run(Or(StringLabelFilter("a", "=", "q"), StringLabelFilter("b", "=", "y")), "l",
               stream={"a": "x", "b": "y"})[0] == "l"


def test_logfmt_level_filter_counts_on_loghub():
    lines = loghub_lines("OpenStack")
    stages = [LogfmtParser(), StringLabelFilter("used_vcpus", "=~", ".+")]
    kept = [line for line in lines if run(stages, line)[0] is not None]
    expected = [line for line in lines if re.search(r"(^|\s)used_vcpus=[^\s\"=]", line)]
    assert kept == expected and len(kept) == 15
    assert {run(stages, line)[1]["used_vcpus"] for line in kept} == {"0", "1"}


def test_drop_and_keep():
    stream = {"app": "api", "env": "prod", "pod": "p1"}
    line = "level=info ts=1 caller=x.go"
    _, labels = run([LogfmtParser(), Drop(["ts", ("caller", "=", "y.go"), ("env", "=~", "pr.*")])], line, stream)
    assert labels == {"app": "api", "pod": "p1", "level": "info", "caller": "x.go"}
    _, labels = run([LogfmtParser(), Keep(["level", ("app", "=", "api"), ("pod", "=", "nope")])], line, stream)
    assert labels == {"app": "api", "level": "info"}
    _, labels = run([JsonParser(), Keep(["app"])], "bad", stream, sm={"trace": "t"})
    assert labels == {"app": "api", "__error__": "JSONParserErr",
                      "__error_details__": "Value looks like object, but can't find closing '}' symbol"}
    _, labels = run([JsonParser(), Drop(["__error__", "__error_details__"])], "bad", stream)
    assert labels == stream
    _, labels = run([JsonParser(), Drop([("__error_details__", "=~", "Value.*")])], "bad", stream)
    assert labels == {**stream, "__error__": "JSONParserErr"}


def test_unwrap():
    lb = LabelsBuilder({"app": "a"})
    u = Unwrap("latency")
    lb.reset({"latency": "1.5"})
    assert u.extract(0, "l", lb) == 1.5 and lb.labels() == {"app": "a"}
    lb.reset()
    assert u.extract(0, "l", lb) is None
    lb.reset({"latency": "abc"})
    assert u.extract(0, "l", lb) == 0.0
    assert lb.labels() == {"app": "a", "__error__": "SampleExtractionErr",
                           "__error_details__": 'strconv.ParseFloat: parsing "abc": invalid syntax'}
    lb.reset({"latency": "abc"})
    assert Unwrap("latency", "", [StringLabelFilter("__error__", "=", "")]).extract(0, "l", lb) is None
    lb.reset({"d": "1m30s", "b": "1.5KiB"})
    assert Unwrap("d", "duration").extract(0, "l", lb) == 90.0
    assert Unwrap("b", "bytes").extract(0, "l", lb) == 1536.0
    lb.reset({"d": "x"})
    assert Unwrap("d", "duration_seconds").extract(0, "l", lb) == 0.0
    assert lb.error_details == 'time: invalid duration "x"'


@pytest.mark.parametrize("text,expected", [
    ("1", 1.0), ("-2.5", -2.5), ("1e3", 1000.0), ("+5", 5.0), (".5", 0.5), ("1_000", 1000.0),
    ("Inf", math.inf), ("-infinity", -math.inf), ("0x1p3", 8.0),
])
def test_parse_go_float(text, expected):
    assert parse_go_float(text) == expected


@pytest.mark.parametrize("text,message", [
    ("abc", 'strconv.ParseFloat: parsing "abc": invalid syntax'),
    ("0x10", 'strconv.ParseFloat: parsing "0x10": invalid syntax'),
    ("1e400", 'strconv.ParseFloat: parsing "1e400": value out of range'),
    ("", 'strconv.ParseFloat: parsing "": invalid syntax'),
    (" 1", 'strconv.ParseFloat: parsing " 1": invalid syntax'),
    ("1 ", 'strconv.ParseFloat: parsing "1 ": invalid syntax'),
])
def test_parse_go_float_errors(text, message):
    with pytest.raises(ValueError) as exc:
        parse_go_float(text)
    assert str(exc.value) == message


@pytest.mark.parametrize("text,ns", [
    ("0", 0), ("250ms", 250_000_000), ("1h15m30.5s", 4_530_500_000_000), ("-1.5h", -5_400_000_000_000),
    ("1\u00b5s", 1000), ("3us", 3000), ("2ns", 2), (".5s", 500_000_000),
])
def test_parse_go_duration(text, ns):
    assert parse_go_duration(text) == ns


@pytest.mark.parametrize("text,value", [
    ("5", 5), ("5B", 5), ("5kB", 5000), ("5 KiB", 5120), ("1.5GiB", 1610612736), ("20MB", 20_000_000),
    ("1,000", 1000), ("3 m", 3_000_000),
])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value
