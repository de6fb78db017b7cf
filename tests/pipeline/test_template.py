import pytest

from logql.gocompat.filters import PipelineError
from logql.pipeline.format import LabelFormat, LineFormat
from logql.pipeline.parsers import JsonParser, LogfmtParser
from logql.template.parse import Template, TemplateError, TemplateExecError

from pipeline_helpers import loghub_lines, loghub_structured, run

DATA = {"a": "x", "n": "5", "path": "a b c d", "level": "warn", "msg": "Hello World", "dur": "1m30s",
        "size": "5 MiB", "json": '{"k":{"v":[1,2.5,"s"]},"b":true}', "ts": "2024-03-05 10:20:30"}
LINE = "THE Line"
TS = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z


def render(text: str, data=None) -> str:
    return Template(text).execute(DATA if data is None else data, LINE, TS)


@pytest.mark.parametrize("text,expected", [
    # syntax
    ("plain", "plain"), ("{{.a}}", "x"), ("{{ .a }}-{{.missing}}-", "x--"), ("{{/* c */}}y", "y"),
    ("a {{- .a -}} b", "axb"), ("a  {{- /* c */ -}}  b", "ab"), ("{{ `raw\\n` }}", "raw\\n"), ('{{ "q\\t" }}', "q\t"),
    ("{{ 'a' }}", "97"), ("{{ 1.5 }} {{ 2.0 }} {{ 1e6 }} {{ 0x10 }} {{ -3 }}", "1.5 2 1e+06 16 -3"),
    ("{{ true }} {{ print nil }}", "true <nil>"), ("{{ . | len }}", str(len(DATA))),
    ('{{ index . "level" }}|{{ index . "nope" }}', "warn|"),
    ("{{ $x := .a }}{{ $x }}{{ $x = \"z\" }}{{ $x }}{{ $ | len }}", "xz" + str(len(DATA))),
    ('{{if eq .level "info"}}I{{else if eq .level "warn"}}W{{else}}?{{end}}', "W"),
    ('{{if .missing}}y{{else}}n{{end}}', "n"), ("{{ with .a }}[{{.}}]{{ end }}", "[x]"),
    ("{{ with .missing }}y{{ else }}n{{ end }}", "n"),
    ('{{ range $i, $v := fromJson "[1,2,3]" }}{{ if eq $v 2.0 }}{{ continue }}{{ end }}{{ $i }}:{{ $v }};{{ end }}', "0:1;2:3;"),
    ('{{ range fromJson "[]" }}x{{ else }}empty{{ end }}', "empty"),
    ('{{ range $k, $v := fromJson "{\\"b\\":1,\\"a\\":2}" }}{{ $k }}{{ $v }}{{ break }}{{ end }}', "a2"),
    ("{{ (fromJson .json).k.v }}", "[1 2.5 s]"), ("{{ (fromJson .json).b }}", "true"),
    ("{{ (fromJson .json).nope }}", "<no value>"), ('{{ fromJson "{bad" }}', "<no value>"),
    ("{{ index (fromJson .json).k.v 1 }}", "2.5"),
    # Go built-ins
    ("{{ and .a .n }} {{ and .missing .a }} {{ or .missing .a }} {{ not .a }}", "5  x false"),
    ('{{ eq .a "x" }} {{ eq .a "y" "x" }} {{ ne 1 2 }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt "b" "a" }} {{ ge 1.5 2.5 }}',
     "true true true true true true false"),
    ('{{ len .path }} {{ len "h\u00e9" }}', "7 3"),
    ('{{ printf "%05d|%-4s|%.2f|%v|%q|%x|%5.1f|%t|%s" 42 "ab" 3.14159 1e6 "hi" 255 2.25 true .a }}',
     '00042|ab  |3.14|1e+06|"hi"|ff|  2.2|true|x'),
    ('{{ printf "%d %s" "str" }}', "%!d(string=str) %!s(MISSING)"),
    ('{{ printf "%d" 1 2 }}', "%!(EXTRA int=2)".join(["1", ""])),
    ('{{ print 1 2 "a" "b" 3 }}', "1 2ab3"), ('{{ println "a" 1 }}', "a 1\n"),
    ('{{ html "<a href=\'x\'>&</a>" }}', "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;"),
    ('{{ js "it\'s <b>" }}', "it\\'s \\u003Cb\\u003E"), ('{{ urlquery "a b&c" }}', "a+b%26c"),
    ('{{ slice "hello" 1 3 }}', "el"),
    # Loki functions
    ("{{ __line__ | lower }}", "the line"), ("{{ __timestamp__ }}", "2023-11-14 22:13:20.123456789 +0000 UTC"),
    ('{{ __timestamp__ | date "2006-01-02T15:04:05.000Z07:00" }}', "2023-11-14T22:13:20.123Z"),
    ('{{ date "Mon Jan _2 3:04PM 2006 MST" __timestamp__ }}', "Tue Nov 14 10:13PM 2023 UTC"),
    ('{{ date "02/01/06 15:04:05.999999999" 0 }}', "01/01/70 00:00:00"),
    ("{{ .msg | lower }} {{ .msg | upper }} {{ title \"hello wORld-x y_z\" }}", "hello world HELLO WORLD Hello WORld-X Y_z"),
    ("{{ trunc 3 .msg }}|{{ trunc -3 .msg }}|{{ trunc 50 .msg }}", "Hel|rld|Hello World"),
    ("{{ substr 0 5 .msg }}|{{ substr 6 -1 .msg }}|{{ substr -1 2 .msg }}|{{ substr 3 99 .msg }}", "Hello|World|He|lo World"),
    ('{{ contains "World" .msg }} {{ hasPrefix "He" .msg }} {{ hasSuffix "x" .msg }}', "true true false"),
    ('{{ .path | replace " " "_" | trunc 5 | upper }}', "A_B_C"), ('{{ repeat 3 "ab" }}', "ababab"),
    ('{{ trim "  x y \\n" }}|{{ trimAll "xy" "xyaxby" }}|{{ trimPrefix "a " .path }}|{{ trimSuffix " d" .path }}',
     "x y|axb|b c d|a b c"),
    ('{{ indent 2 "a\\nb" }}|{{ nindent 1 "a" }}', "  a\n  b|\n a"),
    ('[{{ alignLeft 4 .a }}][{{ alignLeft 3 .msg }}][{{ alignRight 4 .a }}][{{ alignRight 3 .msg }}]',
     "[x   ][Hel][   x][rld]"),
    ('{{ b64enc "abc" }} {{ b64dec "YWJj" }} {{ b64dec "YWI" }} {{ b64dec "!!" }}', "YWJj abc ab illegal base64 data at input byte 0"),
    ('{{ urlencode "a b/c?d=é" }} {{ urldecode "a+b%2Fc" }}', "a+b%2Fc%3Fd%3D%C3%A9 a b/c"),
    ('{{ regexReplaceAll "(\\\\w+) (\\\\w+)" .path "${2}-$1" }}', "b-a d-c"),
    ('{{ regexReplaceAll "a*" "baaac" "-" }}', "-b-c-"),
    ('{{ regexReplaceAll "(?P<w>o)" .msg "[$w]" }} {{ regexReplaceAll "o" .msg "$1x" }}', "Hell[o] W[o]rld Hell Wrld"),
    ('{{ regexReplaceAllLiteral "o" .msg "$1" }}', "Hell$1 W$1rld"),
    ('{{ count "o" .msg }} {{ count "a*" "baaac" }}', "2 3"),
    ('{{ default "d" .missing }}{{ .a | default "d" }}{{ default "d" 0 }}', "dxd"),
    ('{{ int "42" }} {{ int "0x10" }} {{ int "3.0" }} {{ int "abc" }} {{ float64 "2.5" }} {{ int 7.9 }}', "42 16 3 0 2.5 7"),
    ("{{ add 1 2 .n }} {{ sub 10 .n }} {{ mul 2 3 .n }} {{ div 7 -2 }} {{ mod -7 3 }} {{ add }}", "8 5 30 -3 -1 0"),
    ("{{ addf 0.1 0.2 }} {{ subf 1 0.9 }} {{ mulf 1.1 3 }} {{ divf 1 3 }} {{ divf 10 4 2 }}",
     "0.3 0.1 3.3 0.3333333333333333 1.25"),
    ('{{ max 1 5 "3" }} {{ min 4 -2 }} {{ maxf 1.5 2 }} {{ minf 1.5 "0.5" }}', "5 -2 2 0.5"),
    ("{{ ceil 1.2 }} {{ floor -1.2 }} {{ round 3.14159 2 }} {{ round 2.5 0 }} {{ round 1.45 1 0.6 }}", "2 -2 3.14 3 1.4"),
    ("{{ now | unixEpoch | len }}", "10"),
    ('{{ toDate "2006-01-02 15:04:05" .ts | unixEpoch }}', "1709634030"),
    ('{{ toDate "2006-01-02" "bad" }}', "0001-01-01 00:00:00 +0000 UTC"),
    ('{{ toDateInZone "2006-01-02 15:04" "Europe/Paris" "2024-07-01 12:00" | unixEpoch }}', "1719828000"),
    ('{{ toDateInZone "2006-01-02T15:04:05Z07:00" "UTC" "2024-07-01T12:00:00+02:00" | unixEpochMillis }}', "1719828000000"),
    ("{{ __timestamp__ | unixEpoch }} {{ __timestamp__ | unixEpochMillis }} {{ __timestamp__ | unixEpochNanos }}",
     "1700000000 1700000000123 1700000000123456789"),
    ('{{ unixToTime "1700000000" }}|{{ unixToTime "19675" | unixEpoch }}|{{ unixToTime "1700000000123" | unixEpochMillis }}',
     "2023-11-14 22:13:20 +0000 UTC|1699920000|1700000000123"),
    ('{{ .size | bytes }} {{ bytes "1KB" }} {{ .dur | duration }} {{ duration_seconds "250ms" }}', "5.24288e+06 1000 90 0.25"),
    ('{{ ToUpper "a" }}{{ ToLower "B" }} {{ Replace "aaa" "a" "b" 2 }} {{ Trim "xxyxx" "x" }} {{ TrimLeft "xxy" "x" }}'
     '{{ TrimRight "yxx" "x" }} {{ TrimPrefix "abc" "a" }} {{ TrimSuffix "abc" "c" }} [{{ TrimSpace " s " }}]',
     "Ab bba y yy bc ab [s]"),
])
def test_template_output(text, expected):
    assert render(text) == expected


@pytest.mark.parametrize("text,message", [
    ("{{ .x", "template: line:1: unclosed action"),
    ("{{ foo }}", 'template: line:1: function "foo" not defined'),
    ("{{ if .a }}x", "template: line:1: unexpected EOF"),
    ("{{end}}", "template: line:1: unexpected {{end}}"),
    ("{{ else }}", "template: line:1: unexpected {{else}}"),
    ("{{}}", "template: line:1: missing value for command"),
    ("{{ if }}{{ end }}", "template: line:1: missing value for if"),
    ("{{ $y }}", 'template: line:1: undefined variable "$y"'),
    ("{{ (.a }}", "template: line:1: unclosed left paren"),
    ("{{ .a) }}", "template: line:1: unexpected right paren"),
    ('{{ "abc }}', "template: line:1: unterminated quoted string"),
    ("{{ break }}", "template: line:1: {{break}} outside {{range}}"),
    ("a\n{{ 3x }}", 'template: line:2: bad number syntax: "3x"'),
    ("{{/* x", "template: line:1: unclosed comment"),
])
def test_template_parse_errors(text, message):
    with pytest.raises(TemplateError) as exc:
        Template(text)
    assert str(exc.value) == message


@pytest.mark.parametrize("text,message", [
    ("{{ trunc .n .a }}", 'template: line:1:9: executing "line" at <.n>: wrong type for value; expected int; got string'),
    ("{{ .a.b }}", 'template: line:1:3: executing "line" at <.a.b>: can\'t evaluate field b in type string'),
    ("{{ substr 5 1 .a }}", 'template: line:1:3: executing "line" at <substr>: error calling substr: '
                            "runtime error: slice bounds out of range [5:1]"),
    ('{{ urldecode "%zz" }}', 'template: line:1:3: executing "line" at <urldecode>: error calling urldecode: '
                              'invalid URL escape "%zz"'),
    ("{{ .a 1 }}", 'template: line:1:3: executing "line" at <.a>: a is not a method but has arguments'),
    ("{{ nil }}", 'template: line:1:3: executing "line" at <nil>: nil is not a command'),
    ("x\n {{ eq .n 5 }}", 'template: line:2:4: executing "line" at <eq>: error calling eq: incompatible types for comparison'),
    ("{{ div 1 0 }}", 'template: line:1:3: executing "line" at <div>: error calling div: runtime error: integer divide by zero'),
    ('{{ unixToTime "123" }}', 'template: line:1:3: executing "line" at <unixToTime>: error calling unixToTime: '
                               "unable to parse time '123': unknown format"),
    ("{{ upper 1 }}", 'template: line:1:9: executing "line" at <1>: expected string; found 1'),
    ('{{ trunc "1" .a }}', 'template: line:1:9: executing "line" at <"1">: expected integer; found "1"'),
    ("{{ lower }}", 'template: line:1:3: executing "line" at <lower>: wrong number of args for lower: want 1 got 0'),
    ('{{ regexReplaceAll "(" .a "" }}', 'template: line:1:3: executing "line" at <regexReplaceAll>: error calling '
                                        "regexReplaceAll: error parsing regexp: missing closing ): `(`"),
])
def test_template_exec_errors(text, message):
    with pytest.raises(TemplateExecError) as exc:
        render(text)
    assert str(exc.value) == message


# --------------------------------------------------------------------------- stages

def test_line_format_stage():
    stages = [LogfmtParser(), LineFormat("{{.method}} {{.path}} {{.status}}")]
    assert run(stages, "method=GET path=/x status=200 extra=1")[0] == "GET /x 200"
    out, labels = run([LineFormat('{{ __line__ | lower }} {{ .app }}')], "ABC", stream={"app": "api"})
    assert out == "abc api" and labels == {"app": "api"}
    out, labels = run([JsonParser(), LineFormat("{{ .__error__ }}|{{ .__error_details__ }}")], "bad")
    assert out == "JSONParserErr|Value looks like object, but can't find closing '}' symbol"


def test_line_format_error_keeps_old_line():
    out, labels = run([LineFormat("{{ trunc .n .x }}")], "old", stream={"n": "1", "x": "y"})
    assert out == "old"
    assert labels == {"n": "1", "x": "y", "__error__": "TemplateFormatErr",
                      "__error_details__": 'template: line:1:9: executing "line" at <.n>: '
                                           "wrong type for value; expected int; got string"}


def test_line_format_build_error():
    with pytest.raises(PipelineError) as exc:
        LineFormat("{{.x")
    assert str(exc.value) == "invalid line template: template: line:1: unclosed action"


def test_label_format_rename_and_templates():
    stream = {"app": "api", "env": "prod"}
    stages = [LogfmtParser(), LabelFormat([("svc", "app", False), ("msg", "{{.level}}: {{.msg}} {{.svc}}", True),
                                           ("ghost", "nope", False), ("env", "x{{.env}}", True)])]
    out, labels = run(stages, 'level=info msg="hi there"', stream)
    assert out == 'level=info msg="hi there"'
    assert labels == {"svc": "api", "env": "xprod", "level": "info", "msg": "info: hi there api"}


def test_label_format_templates_see_map_captured_once():
    stages = [LabelFormat([("a", "{{.b}}1", True), ("c", "{{.a}}", True)])]
    assert run(stages, "l", stream={"a": "A", "b": "B"})[1] == {"a": "B1", "b": "B", "c": "A"}


def test_label_format_counts_as_extraction():
    stages = [LabelFormat([("level", "fixed", True)]), LogfmtParser()]
    assert run(stages, "level=info")[1] == {"level": "fixed"}


def test_label_format_error_and_build_errors():
    out, labels = run([LabelFormat([("x", "{{ div 1 0 }}", True)])], "l", stream={"x": "keep"})
    assert labels["x"] == "keep" and labels["__error__"] == "TemplateFormatErr"
    assert labels["__error_details__"].startswith('template: label:1:3: executing "label" at <div>')
    with pytest.raises(PipelineError, match="^multiple label name 'a' not allowed in a single format operation$"):
        LabelFormat([("a", "b", False), ("a", "c", False)])
    with pytest.raises(PipelineError, match="^__error__ cannot be formatted$"):
        LabelFormat([("__error__", "b", False)])
    with pytest.raises(PipelineError) as exc:
        LabelFormat([("a", "{{ .b", True)])
    assert str(exc.value) == "invalid template for label 'a': template: label:1: unclosed action"


def test_line_format_over_apache_lines():
    rows = loghub_structured("Apache")
    lines = loghub_lines("Apache")
    from logql.pipeline.parsers import PatternParser
    stages = [PatternParser("[<time>] [<level>] <content>"),
              LineFormat('{{ .level | upper | alignLeft 6 }}|{{ toDate "Mon Jan 02 15:04:05 2006" .time | unixEpoch }}')]
    for line, row in zip(lines[:200], rows[:200]):
        out, _ = run(stages, line)
        level, epoch = out.split("|")
        assert level == row["Level"].upper().ljust(6)[:6]
        assert int(epoch) > 1_000_000_000  # 2005 dates parse
    out, _ = run(stages, lines[0])
    assert out == "NOTICE|1133671664"
