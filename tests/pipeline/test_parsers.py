import pytest

from logql.gocompat.filters import PipelineError
from logql.pipeline.parsers import (JsonParser, LogfmtParser, PatternParser, RegexpParser, UnpackParser,
                                  sanitize_key)
from logql.pipeline.label_filters import StringLabelFilter

from pipeline_helpers import loghub_lines, loghub_structured, run


@pytest.mark.parametrize("key,expected", [
    ("cou-nter", "cou_nter"), ("a.b", "a_b"), ("1st", "_1st"), ("User-Agent", "User_Agent"),
    ("h\u00e9llo", "h_llo"), ("  padded ", "padded"), ("   ", ""),
])
def test_sanitize_key(key, expected):
    assert sanitize_key(key) == expected


# --------------------------------------------------------------------------- json

def test_json_flattens_nested_objects_and_keeps_number_tokens():
    line = ('{"pod":{"deployment":{"ref":"x"}},"n":1e3,"f":1000.0,"b":true,"z":null,'
            '"arr":[1,2],"esc":"a\\"b\\u00e9","1st":"d","a.b":"dots"}')
    out, labels = run(JsonParser(), line, stream={"app": "api"})
    assert out == line
    assert labels == {"1st" and "_1st": "d", "a_b": "dots", "app": "api", "b": "true", "esc": 'a"b\u00e9',
                      "f": "1000.0", "n": "1e3", "pod_deployment_ref": "x"}


def test_json_duplicate_keys_first_wins_and_collision_suffix():
    line = '{"app":"inner","level":"a","level":"b","x":{"y":1},"x_y":2}'
    _, labels = run(JsonParser(), line, stream={"app": "api"})
    assert labels == {"app": "api", "app_extracted": "inner", "level": "a", "x_y": "1"}


def test_json_empty_segments_are_omitted():
    _, labels = run(JsonParser(), '{"a":{" ":{"b":"v"}}, "":"skip"}')
    assert labels == {"a_b": "v"}


@pytest.mark.parametrize("line,details", [
    ("not json", "Value looks like object, but can't find closing '}' symbol"),
    ("", "Value looks like object, but can't find closing '}' symbol"),
    ('{"a":1', "Value looks like object, but can't find closing '}' symbol"),
    ('{"a":"unterminated', "Value is string, but can't find closing '\"' symbol"),
])
def test_json_errors(line, details):
    out, labels = run(JsonParser(), line, stream={"app": "api"})
    assert out == line
    assert labels == {"app": "api", "__error__": "JSONParserErr", "__error_details__": details}


def test_json_lone_surrogate_becomes_replacement_char():
    _, labels = run(JsonParser(), '{"a":"x\\ud800y"}')
    assert labels == {"a": "x\ufffdy"}


def test_json_extractions():
    line = ('{"response":{"status":200,"ok":true},"request":{"headers":{"User-Agent":"curl/8", "X":1}},'
            '"servers":["a","b"],"nul":null,"app":"inner"}')
    stage = JsonParser([("status", "response.status"), ("ua", 'request.headers["User-Agent"]'),
                        ("servers", "servers"), ("first", "servers[0]"), ("nul", "nul"),
                        ("missing", "nope.deeper"), ("app", "app"), ("hdrs", ".request.headers")])
    _, labels = run(stage, line, stream={"app": "api"})
    assert labels == {
        "app": "api", "app_extracted": "inner", "first": "a", "missing": "", "nul": "",
        "servers": '["a","b"]', "status": "200", "ua": "curl/8",
        "hdrs": '{"User-Agent":"curl/8", "X":1}',
    }


def test_json_extractions_overwrite_earlier_parsers_and_need_json_start():
    _, labels = run([LogfmtParser(), JsonParser([("a", "a")])], 'a=1', stream={})
    assert labels == {"a": "1", "__error__": "JSONParserErr"}
    _, labels = run([JsonParser(), JsonParser([("a", "b")])], '{"a":"x","b":"y"}')
    assert labels == {"a": "y", "b": "y"}


def test_json_extraction_expression_errors():
    with pytest.raises(PipelineError, match=r"^cannot parse expression \[a\.\]"):
        JsonParser([("x", "a.")])
    with pytest.raises(PipelineError, match="^invalid extracted label name 'a-b'$"):
        JsonParser([("a-b", "a")])


# --------------------------------------------------------------------------- logfmt

def test_logfmt_basic_and_first_duplicate_wins():
    line = 'level=info msg="hello world" level=error dur=1.5s empty= bare ip=1.2.3.4 cou-nter=3'
    _, labels = run(LogfmtParser(), line, stream={"app": "api"})
    assert labels == {"app": "api", "level": "info", "msg": "hello world", "dur": "1.5s", "ip": "1.2.3.4",
                      "cou_nter": "3"}


def test_logfmt_keep_empty_and_stream_collision():
    _, labels = run(LogfmtParser(keep_empty=True), 'app=x empty= bare', stream={"app": "api"})
    assert labels == {"app": "api", "app_extracted": "x", "bare": "", "empty": ""}


def test_logfmt_non_strict_skips_bad_pairs_silently():
    line = 'a=1 "quoted key"=x b=2=3 c=4 d="unterminated'
    _, labels = run(LogfmtParser(), line)
    assert labels == {"a": "1", "c": "4"}


@pytest.mark.parametrize("line,pairs,details", [
    ("foo=bar=baz", {}, "logfmt syntax error at pos 8 : unexpected '='"),
    ('a=1 b="x', {"a": "1"}, "logfmt syntax error at pos 9 : unterminated quoted value"),
    ('a=1 "k"=v c=3', {"a": "1"}, "logfmt syntax error at pos 5 : unexpected '\"'"),
    ("a=1 =v", {"a": "1"}, "logfmt syntax error at pos 5 : unexpected '='"),
    ('a="\\q" b=1', {}, "logfmt syntax error at pos 7 : invalid quoted value"),
])
def test_logfmt_strict_errors(line, pairs, details):
    _, labels = run(LogfmtParser(strict=True), line)
    assert labels == {**pairs, "__error__": "LogfmtParserErr", "__error_details__": details}


def test_logfmt_quoted_escapes_and_adjacent_pairs():
    _, labels = run(LogfmtParser(), 'a="x\\"y\\n\\u00e9"b=2 c="" d="plain"')
    assert labels == {"a": 'x"y\n\u00e9', "b": "2", "d": "plain"}


def test_logfmt_extractions():
    stage = LogfmtParser(extractions=[("lvl", "level"), ("host", "host"), ("app", "app"), ("u", "user")])
    _, labels = run(stage, 'level=warn app=inner level=error user=', stream={"app": "api"})
    assert labels == {"app": "api", "app_extracted": "inner", "host": "", "lvl": "warn", "u": ""}


def test_logfmt_first_extraction_wins_across_parsers():
    _, labels = run([LogfmtParser(), JsonParser()], 'a=1', stream={})
    assert labels == {"a": "1", "__error__": "JSONParserErr",
                      "__error_details__": "Value looks like object, but can't find closing '}' symbol"}
    line = 'level=info'
    _, labels = run([LogfmtParser(), RegexpParser("level=(?P<level>\\w+)"),
                     PatternParser("level=<level>")], line)
    assert labels == {"level": "info"}


def test_logfmt_over_loghub_lines_never_raises():
    for system in ("Android", "Mac", "HealthApp", "Hadoop", "OpenStack"):
        for line in loghub_lines(system):
            for strict in (False, True):
                out, labels = run(LogfmtParser(strict=strict), line)
                assert out == line
                assert all(isinstance(v, str) for v in labels.values())


def test_logfmt_fast_and_exact_scanners_agree():
    from logql.pipeline.parsers import _scan_logfmt_exact, scan_logfmt
    samples = ['a=1 b=2', 'a="x y" b', 'k="a\\"b" z=', 'x=1 y=2=3', 'a=\u00e9t\u00e9 b="c"d=e', '=x', 'q="', ' \t a=b ']
    for system in ("OpenStack", "Android"):
        samples += loghub_lines(system)[:300]
    for line in samples:
        for strict in (False, True):
            assert scan_logfmt(line, strict) == _scan_logfmt_exact(line, strict), line


# --------------------------------------------------------------------------- regexp

def test_regexp_parser():
    stage = RegexpParser("(?P<method>\\w+) (?P<path>\\S+)(?: (?P<proto>HTTP/\\S+))?")
    _, labels = run(stage, "GET /index.html done", stream={"app": "x"})
    assert labels == {"app": "x", "method": "GET", "path": "/index.html", "proto": ""}
    _, labels = run(stage, "!!!", stream={"app": "x"})
    assert labels == {"app": "x"}
    _, labels = run(RegexpParser("(?<app>\\w+)"), "word", stream={"app": "x"})
    assert labels == {"app": "x", "app_extracted": "word"}


@pytest.mark.parametrize("pattern,message", [
    ("foo", "invalid regexp parser: at least one named capture must be supplied"),
    ("(?P<a>x)(?P<a>y)", "invalid regexp parser: duplicate extracted label name 'a'"),
    ("(?P<a_b>x)(?P<a_b>y)|[(?P<c>]", "invalid regexp parser: duplicate extracted label name 'a_b'"),
    ("(?P<a>x", "invalid regexp parser: error parsing regexp: missing closing ): `(?P<a>x`"),
])
def test_regexp_parser_errors(pattern, message):
    with pytest.raises(PipelineError) as exc:
        RegexpParser(pattern)
    assert str(exc.value) == message


# --------------------------------------------------------------------------- pattern

def test_pattern_parser_nginx_line():
    stage = PatternParser('<ip> - - [<_>] "<method> <uri> <_>" <status> <size>')
    line = '10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326'
    _, labels = run(stage, line)
    assert labels == {"ip": "10.0.0.1", "method": "GET", "uri": "/a.gif", "status": "200", "size": "2326"}


def test_pattern_parser_partial_and_anchoring():
    stage = PatternParser("<a> - <b> | <c>")
    assert run(stage, "x - y")[1] == {"a": "x", "b": "y"}          # missing literal: capture takes the rest
    assert run(stage, "no separator")[1] == {"a": "no separator"}
    assert run(PatternParser("GET <path>"), "POST /x")[1] == {}      # leading literal anchors at start
    assert run(PatternParser("<a> end"), "x end trailing")[1] == {"a": "x"}
    assert run(PatternParser("<a>"), "")[1] == {}


@pytest.mark.parametrize("pattern,message", [
    ("foo bar", "invalid pattern parser: at least one capture is required"),
    ("<_> x", "invalid pattern parser: at least one capture is required"),
    ("<a><b>", "invalid pattern parser: found consecutive capture '<a><b>': invalid expression"),
    ("<a> <a>", "invalid pattern parser: duplicate capture name (a): invalid expression"),
])
def test_pattern_parser_errors(pattern, message):
    with pytest.raises(PipelineError) as exc:
        PatternParser(pattern)
    assert str(exc.value) == message


def test_pattern_apache_against_ground_truth():
    lines = loghub_lines("Apache")
    rows = loghub_structured("Apache")
    stage = PatternParser("[<time>] [<level>] <content>")
    for line, row in zip(lines, rows):
        _, labels = run(stage, line)
        assert labels == {"time": row["Time"], "level": row["Level"], "content": row["Content"]}


def test_pattern_openssh_against_ground_truth():
    lines = loghub_lines("OpenSSH")
    rows = loghub_structured("OpenSSH")
    stage = PatternParser("<month> <day> <time> <host> sshd[<pid>]: <content>")
    for line, row in zip(lines, rows):
        _, labels = run(stage, line)
        content = labels.pop("content")
        assert content == line.split("]: ", 1)[1]
        assert content.rstrip() == row["Content"]  # the CSV trims trailing blanks
        assert labels == {"month": row["Date"], "day": row["Day"], "time": row["Time"],
                          "host": row["Component"], "pid": row["Pid"]}


def test_pattern_from_event_templates_reconstructs_content():
    """Each loghub template `<*>` becomes a capture; re-filling the template
    with the captured values must give back the original content."""
    rows = loghub_structured("OpenSSH")
    checked = 0
    for row in rows:
        template = row["EventTemplate"]
        parts = template.split("<*>")
        if len(parts) < 2 or any(p == "" for p in parts[1:-1]):
            continue  # adjacent wildcards are not expressible as a pattern
        pattern = "".join(p + (f"<p{i}>" if i < len(parts) - 1 else "") for i, p in enumerate(parts))
        _, labels = run(PatternParser(pattern), row["Content"])
        values = [labels.get(f"p{i}") for i in range(len(parts) - 1)]
        if None in values:
            continue
        rebuilt = "".join(p + (values[i] if i < len(values) else "") for i, p in enumerate(parts))
        if parts[-1] == "" or row["Content"].endswith(parts[-1]):
            assert rebuilt == row["Content"], (pattern, row["Content"])
            checked += 1
    assert checked > 1500


# --------------------------------------------------------------------------- unpack

def test_unpack():
    line = '{"_entry":"original line","level":"warn","app":"inner","n":1,"o":{"a":"b"}}'
    out, labels = run(UnpackParser(), line, stream={"app": "api"})
    assert out == "original line"
    assert labels == {"app": "api", "app_extracted": "inner", "level": "warn"}


def test_unpack_without_entry_and_errors():
    line = '{"level":"warn"}'
    assert run(UnpackParser(), line) == (line, {})
    assert run(UnpackParser(), "") == ("", {})
    assert run(UnpackParser(), "plain") == ("plain", {
        "__error__": "JSONParserErr", "__error_details__": "expecting json object(6), but it is not"})
    out, labels = run(UnpackParser(), '{"_entry":')
    assert out == '{"_entry":' and labels["__error__"] == "JSONParserErr"


def test_parsers_then_filter_on_error():
    stages = [JsonParser(), StringLabelFilter("__error__", "=", "")]
    assert run(stages, '{"a":1}')[0] == '{"a":1}'
    assert run(stages, 'nope')[0] is None
