"""Go value parsers shared by the lexer, the parser and the pipeline: Prometheus and Go
durations, go-humanize byte sizes, ``strconv.ParseFloat``/``Atoi`` — with Go's error texts."""

from __future__ import annotations

import re

from logql.gocompat.format import go_quote

_ASCII_DIGITS = frozenset("0123456789")


class GoParseError(ValueError):
    """An error with the exact text of the Go function it imitates."""


_PROM_UNITS = {"ms": (1_000_000, 7), "s": (1_000_000_000, 6), "m": (60_000_000_000, 5),
               "h": (3_600_000_000_000, 4), "d": (86_400_000_000_000, 3),
               "w": (604_800_000_000_000, 2), "y": (31_536_000_000_000_000, 1)}
_MAX_I64 = (1 << 63) - 1


def parse_prom_duration(s: str) -> int:
    """Prometheus ``model.ParseDuration`` → nanoseconds (ranges ``[...]``)."""
    if s == "0":
        return 0
    if s == "":
        raise GoParseError("empty duration string")
    orig, total, last_pos, i, n = s, 0, 0, 0, len(s)
    while i < n:
        j = i
        while j < n and s[j] in _ASCII_DIGITS:
            j += 1
        if j == i:
            raise GoParseError("not a valid duration string: " + go_quote(orig))
        v = int(s[i:j])
        if v > 0xFFFFFFFFFFFFFFFF:
            raise GoParseError("not a valid duration string: " + go_quote(orig))
        k = j
        while k < n and s[k] not in _ASCII_DIGITS:
            k += 1
        if k == j:
            raise GoParseError("not a valid duration string: " + go_quote(orig))
        unit = s[j:k]
        if unit not in _PROM_UNITS:
            raise GoParseError(f"unknown unit {go_quote(unit)} in duration {go_quote(orig)}")
        mult, pos = _PROM_UNITS[unit]
        if pos <= last_pos:
            raise GoParseError("not a valid duration string: " + go_quote(orig))
        last_pos = pos
        if v > (1 << 63) // mult:
            raise GoParseError("duration out of range")
        total += v * mult
        if total > _MAX_I64:
            raise GoParseError("duration out of range")
        i = k
    return total


_GO_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 1_000_000,
             "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}


def parse_go_duration(s: str) -> int:
    """Go ``time.ParseDuration`` → nanoseconds, with Go's error texts."""
    orig = s
    invalid = "time: invalid duration " + go_quote(orig)
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if s == "":
        raise GoParseError(invalid)
    d, i, n = 0, 0, len(s)
    while i < n:
        c = s[i]
        if not (c == "." or c in _ASCII_DIGITS):
            raise GoParseError(invalid)
        j = i
        while j < n and s[j] in _ASCII_DIGITS:
            j += 1
        pre = j > i
        v = int(s[i:j]) if pre else 0
        if v > 1 << 63:
            raise GoParseError(invalid)
        f, scale, post = 0, 1.0, False
        if j < n and s[j] == ".":
            j += 1
            k = j
            overflow = False
            while k < n and s[k] in _ASCII_DIGITS:
                if not overflow:
                    if f > ((1 << 63) - 1) // 10:
                        overflow = True
                    else:
                        f = f * 10 + int(s[k])
                        scale *= 10
                k += 1
            post = k > j
            j = k
        if not pre and not post:
            raise GoParseError(invalid)
        k = j
        while k < n and not (s[k] == "." or s[k] in _ASCII_DIGITS):
            k += 1
        if k == j:
            raise GoParseError("time: missing unit in duration " + go_quote(orig))
        u = s[j:k]
        unit = _GO_UNITS.get(u)
        if unit is None:
            raise GoParseError(f"time: unknown unit {go_quote(u)} in duration {go_quote(orig)}")
        if v > (1 << 63) // unit:
            raise GoParseError(invalid)
        v *= unit
        if f > 0:
            v += int(float(f) * (float(unit) / scale))
            if v > 1 << 63:
                raise GoParseError(invalid)
        d += v
        if d > 1 << 63:
            raise GoParseError(invalid)
        i = k
    if neg:
        return -d
    if d > _MAX_I64:
        raise GoParseError(invalid)
    return d


def parse_duration_token(s: str) -> int:
    """Loki's DURATION reader: Prometheus syntax first, then Go's."""
    try:
        return parse_prom_duration(s)
    except GoParseError:
        return parse_go_duration(s)


_BYTES_TABLE = {
    "b": 1, "kib": 1 << 10, "kb": 10**3, "mib": 1 << 20, "mb": 10**6, "gib": 1 << 30,
    "gb": 10**9, "tib": 1 << 40, "tb": 10**12, "pib": 1 << 50, "pb": 10**15, "eib": 1 << 60,
    "eb": 10**18, "": 1, "ki": 1 << 10, "k": 10**3, "mi": 1 << 20, "m": 10**6, "gi": 1 << 30,
    "g": 10**9, "ti": 1 << 40, "t": 10**12, "pi": 1 << 50, "p": 10**15, "ei": 1 << 60, "e": 10**18,
}


def parse_bytes(s: str) -> int:
    """go-humanize ``ParseBytes`` (units case-insensitive, SI and IEC)."""
    last = 0
    for ch in s:
        if not (ch.isdigit() or ch in ".,"):
            break
        last += 1
    num = s[:last].replace(",", "")
    f = go_parse_float(num)
    extra = s[last:].strip().lower()
    mult = _BYTES_TABLE.get(extra)
    if mult is None:
        raise GoParseError("unhandled size name: " + extra)
    f *= mult
    if f >= 18446744073709551615.0:
        raise GoParseError("too large: " + s)
    return int(f)


def underscore_ok(s: str) -> bool:
    saw, i = "^", 0
    if s[:1] in ("+", "-"):
        s = s[1:]
    hexa = False
    if len(s) >= 2 and s[0] == "0" and s[1] in "bBoOxX":
        i, saw, hexa = 2, "0", s[1] in "xX"
    while i < len(s):
        c = s[i]
        if c in _ASCII_DIGITS or (hexa and c in "abcdefABCDEF"):
            saw = "0"
        elif c == "_":
            if saw != "0":
                return False
            saw = "_"
        else:
            if saw == "_":
                return False
            saw = "!"
        i += 1
    return saw != "_"


# re.ASCII: Go reads only ASCII digits, Python's \d would take '٣' too
_DEC_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z", re.ASCII)
_HEX_FLOAT = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+\Z",
                        re.ASCII)
_SPECIAL_FLOATS = {"inf": float("inf"), "+inf": float("inf"), "-inf": float("-inf"),
                   "infinity": float("inf"), "+infinity": float("inf"),
                   "-infinity": float("-inf"), "nan": float("nan")}


def go_parse_float(s: str) -> float:
    """Go ``strconv.ParseFloat(s, 64)`` with its error texts."""
    # fast path: plain decimals are by far the most common label values (runs per line)
    if s and s.isascii() and (s[0].isdigit() or s[0] == "-") and s[-1].isdigit() \
            and "_" not in s and "x" not in s and "X" not in s:
        try:
            v = float(s)
        except (ValueError, OverflowError):
            pass
        else:
            if v not in (float("inf"), float("-inf")):
                return v
    syntax = f"strconv.ParseFloat: parsing {go_quote(s)}: invalid syntax"
    special = _SPECIAL_FLOATS.get(s.lower())
    if special is not None:
        return special
    t = s
    if "_" in s:
        if not underscore_ok(s):
            raise GoParseError(syntax)
        t = s.replace("_", "")
    try:
        if _DEC_FLOAT.match(t):
            v = float(t)
        elif _HEX_FLOAT.match(t):
            v = float.fromhex(t)
        else:
            raise GoParseError(syntax)
    except OverflowError:
        v = float("inf")
    if v in (float("inf"), float("-inf")):
        raise GoParseError(f"strconv.ParseFloat: parsing {go_quote(s)}: value out of range")
    return v


def go_atoi(s: str) -> int:
    """Go ``strconv.Atoi``: optional sign and decimal digits only, 64-bit range."""
    body = s[1:] if s[:1] in ("+", "-") else s
    # isdigit alone would take '٣', int() alone ' 5 ' and '1_0': Go takes none of them
    if not (body.isascii() and body.isdigit()):
        raise GoParseError(f"strconv.Atoi: parsing {go_quote(s)}: invalid syntax")
    v = int(s)
    if not -(1 << 63) <= v <= _MAX_I64:
        raise GoParseError(f"strconv.Atoi: parsing {go_quote(s)}: value out of range")
    return v
