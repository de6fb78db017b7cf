"""Lexer tokens, positions and the Go value parsers/printers it relies on."""

import pytest

from logql.errors import ParseError
from logql.gocompat.format import (
    format_float_f, format_float_v, go_duration_str, go_quote, humanize_bytes, prom_duration_str,
)
from logql.syntax.lexer import (
    GoParseError, go_atoi, go_parse_float, parse_bytes, parse_go_duration, parse_prom_duration,
    tokenize,
)


def kinds(text):
    return [(t.kind, t.value, t.line, t.col) for t in tokenize(text)]


@pytest.mark.parametrize("text,want", [
    ("5KB", [("BYTES", 5000, 0, 1)]),
    ("5kb", [("BYTES", 5000, 0, 1), ("IDENTIFIER", "b", 1, 3)]),
    ("5mb", [("DURATION", 300 * 10**9, 0, 1), ("IDENTIFIER", "b", 1, 3)]),
    ("1.5GiB", [("BYTES", 1610612736, 0, 1)]),
    ("1h30m", [("DURATION", 5400 * 10**9, 0, 1)]),
    ("1h0.0m0s", [("DURATION", 3600 * 10**9, 0, 1)]),
    ("-1s", [("DURATION", -(10**9), 0, 1)]),
    ("- 1s", [("-", "-", 1, 1), ("DURATION", 10**9, 0, 3)]),
    ("-5", [("-", "-", 1, 1), ("NUMBER", "5", 1, 2)]),
    ("--strict --keep-empty", [("FUNCTION_FLAG", "--strict", 0, 1),
                               ("FUNCTION_FLAG", "--keep-empty", 0, 10)]),
    ("--nope", [("-", "-", 1, 1), ("-", "-", 1, 2), ("IDENTIFIER", "nope", 1, 3)]),
    ("0x1p3 1_000 .5 1e-3", [("NUMBER", "0x1p3", 1, 1), ("NUMBER", "1_000", 1, 7),
                             ("NUMBER", ".5", 1, 13), ("NUMBER", "1e-3", 1, 16)]),
    ("[5m]", [("RANGE", 300 * 10**9, 0, 1)]),
    ('"a\\tb"', [("STRING", "a\tb", 1, 1)]),
    ("`a\\tb`", [("STRING", "a\\tb", 1, 1)]),
    ('"\\xff"', [("STRING", "\udcff", 1, 1)]),
    ("rate(", [("RATE", "rate", 1, 1), ("(", "(", 1, 5)]),
    ("rate x", [("IDENTIFIER", "rate", 1, 1), ("IDENTIFIER", "x", 1, 6)]),
    ("sum by (a)", [("SUM", "sum", 1, 1), ("by", "by", 1, 5), ("(", "(", 1, 8),
                    ("IDENTIFIER", "a", 1, 9), (")", ")", 1, 10)]),
    ("sum BY (a)", [("IDENTIFIER", "sum", 1, 1), ("by", "BY", 1, 5), ("(", "(", 1, 8),
                    ("IDENTIFIER", "a", 1, 9), (")", ")", 1, 10)]),
    ("Json OR", [("json", "Json", 1, 1), ("or", "OR", 1, 6)]),
    ("ip(", [("ip", "ip", 1, 1), ("(", "(", 1, 3)]),
    ("bytes( duration(  duration_seconds(", [
        ("BYTES_CONV", "bytes", 1, 1), ("(", "(", 1, 6), ("DURATION_CONV", "duration", 1, 8),
        ("(", "(", 1, 16), ("DURATION_SECONDS_CONV", "duration_seconds", 1, 19),
        ("(", "(", 1, 35)]),
    ("=~ !~ != == >= <= |= |~ |> !>", [
        ("=~", None, 0, 1), ("!~", None, 0, 4), ("!=", None, 0, 7), ("==", None, 0, 10),
        (">=", None, 0, 13), ("<=", None, 0, 16), ("|=", None, 0, 19), ("|~", None, 0, 22),
        ("|>", None, 0, 25), ("!>", None, 0, 28)]),
    ("@ ; ! ~", [("IDENTIFIER", "@", 1, 1), ("IDENTIFIER", ";", 1, 3),
                 ("IDENTIFIER", "!", 1, 5), ("IDENTIFIER", "~", 1, 7)]),
    ("a # c\n  b", [("IDENTIFIER", "a", 1, 1), ("IDENTIFIER", "b", 2, 3)]),
    ("é\tx", [("IDENTIFIER", "é", 1, 1), ("IDENTIFIER", "x", 1, 3)]),
])
def test_tokens(text, want):
    got = kinds(text)
    assert got[-1][0] == "$end"
    got = [(k, None if k in ("=~", "!~", "!=", "==", ">=", "<=", "|=", "|~", "|>", "!>") else v,
            line, col) for k, v, line, col in got[:-1]]
    assert got == want


def test_end_position_after_newline():
    assert kinds("a\n")[-1] == ("$end", None, 2, 1)
    assert kinds("ab")[-1] == ("$end", None, 1, 3)


def test_lexer_error_is_a_final_token():
    toks = tokenize('{a="b} x')
    assert toks[-1].kind == "ERROR"
    assert str(toks[-1].value) == "parse error at line 1, col 4: literal not terminated"


def test_invalid_utf8_is_reported():
    with pytest.raises(ParseError) as e:
        from logql.syntax.parser import parse_expr
        parse_expr('{a="\udcff"}')
    assert str(e.value) == "parse error at line 1, col 4: invalid UTF-8 encoding"


@pytest.mark.parametrize("s,ns", [
    ("5m", 300 * 10**9), ("1h30m", 5400 * 10**9), ("0", 0), ("1y", 365 * 86400 * 10**9),
    ("2w", 14 * 86400 * 10**9), ("100ms", 10**8), ("1d2h", 26 * 3600 * 10**9),
])
def test_prom_duration(s, ns):
    assert parse_prom_duration(s) == ns


@pytest.mark.parametrize("s,msg", [
    ("", "empty duration string"),
    ("5", 'not a valid duration string: "5"'),
    ("1m1h", 'not a valid duration string: "1m1h"'),
    ("5us", 'unknown unit "us" in duration "5us"'),
    ("300000y", "duration out of range"),
])
def test_prom_duration_errors(s, msg):
    with pytest.raises(GoParseError) as e:
        parse_prom_duration(s)
    assert str(e.value) == msg


@pytest.mark.parametrize("s,ns", [
    ("1.5h", 5400 * 10**9), ("-1s", -(10**9)), ("1h15m30.5s", 4530500000000), ("10µs", 10000),
    ("10us", 10000), ("0", 0), ("+3ns", 3), (".5s", 500000000),
])
def test_go_duration(s, ns):
    assert parse_go_duration(s) == ns


@pytest.mark.parametrize("s,msg", [
    ("2d", 'time: unknown unit "d" in duration "2d"'),
    ("5", 'time: missing unit in duration "5"'),
    ("", 'time: invalid duration ""'),
    ("x", 'time: invalid duration "x"'),
])
def test_go_duration_errors(s, msg):
    with pytest.raises(GoParseError) as e:
        parse_go_duration(s)
    assert str(e.value) == msg


@pytest.mark.parametrize("s,n", [("5KB", 5000), ("5kB", 5000), ("5KiB", 5120), ("1.5MB", 1500000),
                                 ("1b", 1), ("0", 0), ("2 GiB", 2 << 30), ("1,000 B", 1000)])
def test_parse_bytes(s, n):
    assert parse_bytes(s) == n


def test_parse_bytes_error():
    with pytest.raises(GoParseError) as e:
        parse_bytes("5qb")
    assert str(e.value) == "unhandled size name: qb"


@pytest.mark.parametrize("s,v", [("1", 1.0), ("1_000", 1000.0), ("0x1p3", 8.0), ("-1.5e3", -1500.0),
                                 ("Inf", float("inf")), ("017", 17.0), (".5", 0.5), ("5.", 5.0)])
def test_go_parse_float(s, v):
    assert go_parse_float(s) == v


@pytest.mark.parametrize("s", ["0x10", "1__0", "_1", "0b1", "0o7", "1e", "abc", ""])
def test_go_parse_float_errors(s):
    with pytest.raises(GoParseError) as e:
        go_parse_float(s)
    assert str(e.value) == f'strconv.ParseFloat: parsing "{s}": invalid syntax'


def test_go_atoi():
    assert go_atoi("05") == 5 and go_atoi("-3") == -3
    for bad in ("1.2", "0x10", "1_0", "", "+"):
        with pytest.raises(GoParseError):
            go_atoi(bad)


@pytest.mark.parametrize("v,g,f", [
    (2.0, "2", "2"), (0.5, "0.5", "0.5"), (1e21, "1e+21", "1000000000000000000000"),
    (1e6, "1e+06", "1000000"), (123456.0, "123456", "123456"), (1e-5, "1e-05", "0.00001"),
    (-0.0, "-0", "-0"), (float("nan"), "NaN", "NaN"), (float("-inf"), "-Inf", "-Inf"),
    (1234567.0, "1.234567e+06", "1234567"),
])
def test_float_formatting(v, g, f):
    assert format_float_v(v) == g
    assert format_float_f(v) == f


@pytest.mark.parametrize("ns,go,prom", [
    (0, "0s", "0s"), (1500, "1.5µs", "0s"), (250 * 10**6, "250ms", "250ms"),
    (3600 * 10**9, "1h0m0s", "1h"), (90 * 10**9, "1m30s", "1m30s"),
    (-300 * 10**9, "-5m0s", None), (7 * 86400 * 10**9, "168h0m0s", "1w"),
    (10 * 86400 * 10**9, "240h0m0s", "10d"), (365 * 86400 * 10**9, "8760h0m0s", "1y"),
])
def test_duration_formatting(ns, go, prom):
    assert go_duration_str(ns) == go
    if prom is not None:
        assert prom_duration_str(ns) == prom


@pytest.mark.parametrize("n,s", [(0, "0B"), (9, "9B"), (10, "10B"), (10000, "10kB"), (1000, "1.0kB"),
                                 (209715200, "210MB"), (5500000, "5.5MB"), (10**6, "1.0MB")])
def test_humanize_bytes(n, s):
    assert humanize_bytes(n) == s


@pytest.mark.parametrize("s,q", [
    ("abc", '"abc"'), ('a"b', '"a\\"b"'), ("a\\b", '"a\\\\b"'), ("\n\t\x00\x7f", '"\\n\\t\\x00\\x7f"'),
    ("é😀", '"é😀"'), ("\u00a0\u200b", '"\\u00a0\\u200b"'), ("\U000e0001", '"\\U000e0001"'),
    ("\udcff", '"\\xff"'),
])
def test_go_quote(s, q):
    assert go_quote(s) == q
