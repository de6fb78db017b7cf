import pytest

from logql.gocompat.filters import PipelineError
from logql.pipeline.stages import Pipeline, hoist_line_filters
from logql.pipeline.line import Decolorize, LineFilter
from logql.pipeline.parsers import JsonParser, UnpackParser
from logql.pipeline.label_filters import StringLabelFilter

from pipeline_helpers import loghub_lines, run


def keeps(op, values, line):
    return LineFilter(op, values).process(0, line, None) is not None


@pytest.mark.parametrize("op,values,line,expected", [
    ("|=", ["error"], "an error here", True),
    ("|=", ["Error"], "an error here", False),
    ("!=", ["error"], "an error here", False),
    ("!=", ["timeout"], "an error here", True),
    ("|=", [""], "anything", True),
    ("!=", [""], "anything", False),          # quirk: != "" drops every line
    ("|~", [""], "x", True),
    ("|~", [".*"], "x", True),
    ("|~", ["(?i)ERROR"], "an error", True),
    ("|~", ["(?i)ERROR"], "an erro", False),
    ("|~", ["(?i)k"], "\u212a", True),         # Go folds the Kelvin sign onto k
    ("|~", ["e.r"], "e\nr", False),            # . does not match newline
    ("|~", ["(?s)e.r"], "e\nr", True),
    ("|~", ["^b"], "ab", False),
    ("|~", ["a$"], "ab\na", True),
    ("|~", ["(?m)^b"], "a\nb", True),
    ("|~", ["err(or)?\\d+"], "err42", True),
    ("|~", ["\\.log"], "x.log", True),
    ("|~", ["\\.log"], "xalog", False),
    ("|~", ["foo|bar"], "xbarx", True),
    ("|~", [".*foo.*"], "xfoox", True),
    ("!~", ["foo|bar"], "xbarx", False),
    ("|=", ["GET", "POST"], "a POST b", True),
    ("|=", ["GET", "POST"], "a PUT b", False),
    ("!=", ["debug", "trace"], "a trace", False),
    ("!=", ["debug", "trace"], "info", True),
    ("|>", ["<_> level=error <_>"], "ts=1 level=error msg=x", True),
    ("|>", ["<_> level=error <_>"], "level=error msg=x", False),   # leading wildcard must be non-empty
    ("|>", ["<_> level=error <_>"], "ts=1 level=error", False),    # trailing wildcard must be non-empty
    ("|>", ["foo <_>"], "xxfoo bar", True),                         # quirk: leading literal not anchored
    ("|>", ["<_> end"], "the end", True),
    ("|>", ["<_> end"], "the end!", False),
    ("|>", [""], "", True),
    ("|>", [""], "x", False),
    ("!>", ["<_> healthcheck <_>"], "GET healthcheck ok", False),
    ("|>", ["a <_> b", "c <_> d"], "c x d", True),
    ("|=", [("ip", "10.0.0.0/8")], "from 10.1.2.3 port 22", True),
    ("|=", [("ip", "10.0.0.0/8")], "from 11.1.2.3 port 22", False),
    ("|=", [("ip", "3.180.71.3")], "93.180.71.3", False),
    ("|=", [("ip", "192.168.1.1-192.168.1.50")], "x 192.168.1.42 y", True),
    ("!=", [("ip", "192.168.1.1-192.168.1.50")], "x 192.168.1.51 y", True),
    ("|=", [("ip", "2001:db8::/32")], "addr=2001:db8::1 ok", True),
    ("|=", [("ip", "::1")], "[::1]:80", True),
    ("|=", ["nomatch", ("ip", "10.0.0.0/8")], "10.0.0.1", True),
])
def test_line_filter_semantics(op, values, line, expected):
    assert keeps(op, values, line) is expected


@pytest.mark.parametrize("op,value,message", [
    ("|~", "(x", "error parsing regexp: missing closing ): `(x`"),
    ("|~", "x**", "error parsing regexp: invalid nested repetition operator: `**`"),
    ("|>", "<a> x", "named captures are not allowed: found '<a>'"),
    ("|>", "<_><_>", "found consecutive capture '<_><_>': invalid expression"),
    ("|~", ("ip", "10.0.0.0/8"), "ip: invalid operation"),
    ("|=", ("ip", "not-an-ip"), 'ip: invalid pattern: "not-an-ip"'),
])
def test_line_filter_build_errors(op, value, message):
    with pytest.raises(PipelineError) as exc:
        LineFilter(op, [value])
    assert str(exc.value) == message


@pytest.mark.parametrize("op,values,expected", [
    ("|=", ["error"], [[("error", False)]]),
    ("|=", ["GET", "POST"], [[("GET", False), ("POST", False)]]),
    ("|=", [""], None),
    ("!=", ["x"], None),
    ("|~", ["(?i)timeout"], [[("timeout", True)]]),
    ("|~", ["foo|bar"], [[("foo", False), ("bar", False)]]),
    ("|~", ["connection (refused|reset) by"], 
     # Python's parser factors the common prefix: still a correct (weaker) hint
     [[("connection ", False)], [("re", False)], [("fused", False), ("set", False)], [(" by", False)]]),
    ("|~", ["\\d+"], None),
    ("|~", ["a?"], None),
    ("|~", ["[[:alpha:]]x"], None),        # POSIX class: Python would misread it, so no hint
    ("|>", ["<_> level=error <_>"], [[(" level=error ", False)]]),
    ("|>", ["GET <_> HTTP"], [[("GET ", False)], [(" HTTP", False)]]),
    ("|=", [("ip", "10.0.0.0/8")], None),
])
def test_required_substrings(op, values, expected):
    assert LineFilter(op, values).required_substrings() == expected


def test_required_substrings_never_exclude_a_matching_line():
    lines = loghub_lines("OpenSSH")
    for regex in ["Failed password for (invalid user )?\\w+", "(?i)CONNECTION CLOSED", "port \\d+ ssh2",
                  "Received disconnect|Accepted password", "error: .*authentication"]:
        f = LineFilter("|~", [regex])
        cnf = f.required_substrings()
        assert cnf, regex
        for line in lines:
            if f.match(line):
                for clause in cnf:
                    assert any((n.lower() in line.lower()) if ci else (n in line) for n, ci in clause), (regex, line)


def test_line_filters_against_loghub_counts():
    lines = loghub_lines("OpenSSH")
    count = lambda op, v: sum(1 for l in lines if keeps(op, v, l))  # noqa: E731
    assert count("|=", ["Failed password"]) == sum("Failed password" in l for l in lines)
    assert count("|=", ["Failed password"]) + count("!=", ["Failed password"]) == len(lines)
    # regex, its case-insensitive and literal forms agree on this corpus
    assert count("|~", ["Invalid user"]) == count("|=", ["Invalid user"]) > 0
    assert count("|~", ["(?i)invalid USER"]) == count("|=", ["Invalid user"]) + count("|=", ["invalid user"])
    assert count("|=", [("ip", "173.234.31.186")]) == sum("173.234.31.186" in l for l in lines) > 0


def test_decolorize():
    line = "\x1b[31mERROR\x1b[0m disk \x1b]0;title\x07full"
    assert Decolorize().process(0, line, None) == "ERROR disk full"
    assert Decolorize().process(0, "plain", None) == "plain"


def test_hoisting_keeps_line_filters_behind_barriers():
    dec, js, unpack = Decolorize(), JsonParser(), UnpackParser()
    f1, f2 = LineFilter("|=", ["a"]), LineFilter("|=", ["b"])
    lf = StringLabelFilter("x", "=", "y")
    assert hoist_line_filters([dec, f1]) == [f1, dec]
    assert hoist_line_filters([js, f1, dec, f2]) == [f1, f2, js, dec]
    assert hoist_line_filters([unpack, f1]) == [unpack, f1]
    assert hoist_line_filters([js, lf, f1]) == [js, lf, f1]


def test_line_only_pipeline_fast_path():
    p = Pipeline([LineFilter("|=", ["a"]), LineFilter("!=", ["b"])])
    assert p.line_only and p.match_line("xa") and not p.match_line("ab")
    sp = p.for_stream({"app": "x"})
    line, labels = sp.process(0, "xa")
    assert line == "xa" and labels.labels() == {"app": "x"}
    assert sp.process(0, "ab") is None
    assert Pipeline([]).is_noop
    assert run([LineFilter("|=", ["a"])], "a")[0] == "a"
    assert p.required_substrings() == [[("a", False)]]
