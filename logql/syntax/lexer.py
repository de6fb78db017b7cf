"""LogQL lexer (spec logql.md §1), reproducing Loki's ``text/scanner`` based lexer.

``tokenize(text)`` returns the whole token list at once; a lexical error becomes a final
``ERROR`` token whose ``value`` is the ``ParseError``, raised by the parser only when it
reaches that token (Loki's lexer is pulled lazily by yacc, so an earlier syntax error wins).

Token ``kind`` is the name Loki's yacc parser prints in ``unexpected X`` messages:
``IDENTIFIER STRING NUMBER DURATION RANGE BYTES FUNCTION_FLAG $end``, operator text, keywords
in lower case, function words in upper case (``RATE``, ``BYTES_CONV``...), ``ip`` and
``label_replace``. The Go value parsers (durations, byte sizes, floats) live in
``logql.parser_govalues`` and are re-exported here.
"""

from __future__ import annotations

import re

from logql.errors import ParseError
from logql.gocompat.values import (  # noqa: F401  (re-exported for the parser and pipeline)
    GoParseError, underscore_ok, go_atoi, go_parse_float, parse_bytes, parse_duration_token,
    parse_go_duration, parse_prom_duration,
)


class Token:
    __slots__ = ("kind", "text", "value", "line", "col")

    def __init__(self, kind: str, text: str, value, line: int, col: int):
        self.kind = kind
        self.text = text
        self.value = value
        self.line = line
        self.col = col

    def __repr__(self) -> str:
        return f"Token({self.kind!r}, {self.text!r}, {self.value!r}, {self.line}, {self.col})"


KEYWORDS = frozenset(
    "by without bool on ignoring group_left group_right offset unwrap or and unless json logfmt "
    "regexp pattern unpack line_format label_format decolorize drop keep".split()
)
RANGE_FUNCS = (
    "rate rate_counter count_over_time bytes_rate bytes_over_time avg_over_time sum_over_time "
    "min_over_time max_over_time stdvar_over_time stddev_over_time quantile_over_time "
    "first_over_time last_over_time absent_over_time"
).split()
VECTOR_FUNCS = "sum avg min max count stddev stdvar topk bottomk sort sort_desc approx_topk".split()
FUNCTION_WORDS = {w: w.upper() for w in RANGE_FUNCS + VECTOR_FUNCS}
FUNCTION_WORDS.update(
    vector="VECTOR", label_replace="label_replace", ip="ip", bytes="BYTES_CONV",
    duration="DURATION_CONV", duration_seconds="DURATION_SECONDS_CONV",
)
RANGE_KINDS = frozenset(w.upper() for w in RANGE_FUNCS)
VECTOR_KINDS = frozenset(w.upper() for w in VECTOR_FUNCS)

_TWO_CHAR = frozenset("=~ !~ != == >= <= |= |~ |> !>".split())
_ONE_CHAR = frozenset("{}(),.=|+-*/%^><]")
_FLAGS = frozenset(("--strict", "--keep-empty"))

_WS = re.compile(r"[ \t\r\n]*")
_FAST = re.compile(r'(?P<w>[ \t\r]+)|(?P<n>\n)|(?P<i>[^\W\d]\w*)|(?P<s>"[^"\\\n]*")'
                   r'|(?P<o>=~|!~|!=|==|>=|<=|\|=|\|~|\|>|!>)|(?P<p>[{}(),=|+*/%^><\]])')
_IDENT = re.compile(r"[^\W\d]\w*")
_DQ_PLAIN = re.compile(r'[^"\\\n]*')
_DUR_RUN = re.compile(r"[\d.nuµmshdwy]*")
_BYTES_RUN = re.compile(r"[\d.BikKMGTP]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASCII_DIGITS = frozenset("0123456789")


# --------------------------------------------------------------------------- scanning helpers

def _scan_number(text: str, i: int) -> tuple[int, str | None]:
    """Go ``text/scanner`` number scan from ``i``; returns (end, first error or None)."""
    n = len(text)
    err = None
    base, prefix, digsep, invalid, is_float = 10, "", 0, "", False

    def digits(j: int, b: int) -> tuple[int, int]:
        nonlocal invalid
        ds = 0
        if b <= 10:
            while j < n and (text[j] in _ASCII_DIGITS or text[j] == "_"):
                c = text[j]
                if c == "_":
                    ds |= 2
                else:
                    ds |= 1
                    if ord(c) >= 48 + b and not invalid:
                        invalid = c
                j += 1
        else:
            while j < n and (text[j] in "0123456789abcdefABCDEF_"):
                ds |= 2 if text[j] == "_" else 1
                j += 1
        return j, ds

    j = i
    if text[j] != ".":
        if text[j] == "0":
            j += 1
            c = text[j].lower() if j < n else ""
            if c == "x":
                j, base, prefix = j + 1, 16, "x"
            elif c == "o":
                j, base, prefix = j + 1, 8, "o"
            elif c == "b":
                j, base, prefix = j + 1, 2, "b"
            else:
                base, prefix, digsep = 8, "0", 1
        j, ds = digits(j, base)
        digsep |= ds
        if j < n and text[j] == ".":
            j += 1
            is_float = True
            if prefix in ("o", "b"):
                err = err or "invalid radix point in " + _litname(prefix)
            j, ds = digits(j, base)
            digsep |= ds
    else:
        is_float = True
        j, ds = digits(j + 1, base)
        digsep |= ds
    if digsep & 1 == 0:
        err = err or _litname(prefix) + " has no digits"
    e = text[j].lower() if j < n else ""
    if e in ("e", "p"):
        if e == "e" and prefix not in ("", "0"):
            err = err or f"'{text[j]}' exponent requires decimal mantissa"
        elif e == "p" and prefix != "x":
            err = err or f"'{text[j]}' exponent requires hexadecimal mantissa"
        j += 1
        is_float = True
        if j < n and text[j] in "+-":
            j += 1
        k = j
        while j < n and (text[j] in _ASCII_DIGITS or text[j] == "_"):
            j += 1
        exp_ds = 0
        for c in text[k:j]:
            exp_ds |= 2 if c == "_" else 1
        digsep |= exp_ds
        if exp_ds & 1 == 0:
            err = err or "exponent has no digits"
    elif prefix == "x" and is_float:
        err = err or "hexadecimal mantissa requires a 'p' exponent"
    if not is_float and invalid:
        err = err or f"invalid digit '{invalid}' in {_litname(prefix)}"
    if digsep & 2 and not underscore_ok(text[i:j]):
        err = err or "'_' must separate successive digits"
    return j, err


def _litname(prefix: str) -> str:
    return {"x": "hexadecimal literal", "o": "octal literal", "0": "octal literal",
            "b": "binary literal"}.get(prefix, "decimal literal")


_ESC_SIMPLE = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34}
_HEX = frozenset("0123456789abcdefABCDEF")
_OCT = frozenset("01234567")


def _scan_dq(text: str, i: int) -> tuple[int, str | None, str | None]:
    """Scan a double-quoted string at ``i``: (end, value, error)."""
    n = len(text)
    j = i + 1
    err = None
    escaped = False
    while True:
        j = _DQ_PLAIN.match(text, j).end()
        if j >= n or text[j] == "\n":
            return j, None, err or "literal not terminated"
        if text[j] == '"':
            j += 1
            break
        escaped = True
        j += 1
        c = text[j] if j < n else ""
        if c in _ESC_SIMPLE and c:
            j += 1
        elif c in _OCT and c:
            k = 0
            while k < 3 and j < n and text[j] in _OCT:
                j += 1
                k += 1
            if k < 3:
                err = err or "invalid char escape"
        elif c in ("x", "u", "U"):
            want = {"x": 2, "u": 4, "U": 8}[c]
            j += 1
            k = 0
            while k < want and j < n and text[j] in _HEX:
                j += 1
                k += 1
            if k < want:
                err = err or "invalid char escape"
        else:
            err = err or "invalid char escape"
    if err:
        return j, None, err
    body = text[i + 1:j - 1]
    if not escaped:
        return j, body, None
    value = _go_unquote_body(body)
    if value is None:
        return j, None, "invalid syntax"
    return j, value, None


def _go_unquote_body(body: str) -> str | None:
    """``strconv.Unquote`` of an already scanner-validated double-quoted body."""
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            j = body.find("\\", i)
            j = n if j < 0 else j
            out += body[i:j].encode("utf-8", "surrogatepass")
            i = j
            continue
        c = body[i + 1]
        if c in _ESC_SIMPLE:
            out.append(_ESC_SIMPLE[c])
            i += 2
        elif c in _OCT:
            v = int(body[i + 1:i + 4], 8)
            if v > 255:
                return None
            out.append(v)
            i += 4
        elif c == "x":
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        else:
            width = 4 if c == "u" else 8
            v = int(body[i + 2:i + 2 + width], 16)
            if v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
                return None
            out += chr(v).encode("utf-8")
            i += 2 + width
    return out.decode("utf-8", "surrogateescape")


def _word_kind(text: str, word: str, end: int) -> str:
    """Token kind of an identifier-shaped word ending at `end`: a function word only when a
    call follows (§1.9), else a keyword, else IDENTIFIER."""
    low = word.lower()
    fk = FUNCTION_WORDS.get(low)
    if fk is not None and _is_function(text, end):
        return fk
    if low in KEYWORDS:
        return low
    return "IDENTIFIER"


def _is_function(text: str, j: int) -> bool:
    """Loki's ``isFunction``: next non-blank text is ``(``, or ``by``/``without`` then ``(``."""
    j = _WS.match(text, j).end()
    if text.startswith("(", j):
        return True
    if text.startswith("by", j):
        j += 2
    elif text.startswith("without", j):
        j += 7
    else:
        return False
    return text.startswith("(", _WS.match(text, j).end())


# --------------------------------------------------------------------------- the lexer

def tokenize(text: str) -> list[Token]:
    toks: list[Token] = []
    append = toks.append
    n = len(text)
    i = 0
    line = 1
    ls = 0  # offset of the current line's first character
    bad = -1
    m = _SURROGATE.search(text)
    if m:
        bad = m.start()
    fast = _FAST.match if bad < 0 else None
    while True:
        if fast is not None:
            # Fast path for the common tokens; everything else (numbers, escapes, ranges,
            # comments, '-', errors, end of input) goes through the general code below.
            m = fast(text, i)
            if m is not None:
                j = m.end()
                g = m.lastgroup
                if g == "w":
                    i = j
                    continue
                if g == "n":
                    line += 1
                    ls = i = j
                    continue
                col = i - ls + 1
                if g == "i":
                    word = text[i:j]
                    append(Token(_word_kind(text, word, j), word, word, line, col))
                elif g == "s":
                    append(Token("STRING", text[i:j], text[i + 1:j - 1], line, col))
                elif g == "o":
                    op = text[i:j]
                    append(Token(op, op, None, 0, col))
                else:
                    c = text[i]
                    append(Token(c, c, c, line, col))
                i = j
                continue
        # whitespace and comments
        while True:
            j = _WS.match(text, i).end()
            if j > i:
                nl = text.count("\n", i, j)
                if nl:
                    line += nl
                    ls = text.rfind("\n", i, j) + 1
                i = j
            if i < n and text[i] == "#":
                j = text.find("\n", i)
                i = n if j < 0 else j
                continue
            break
        col = i - ls + 1
        if bad >= 0 and bad < i:
            append(Token("ERROR", "", ParseError("invalid UTF-8 encoding", line, col), line, col))
            return toks
        if i >= n:
            if n == 0:
                # Go's text/scanner reports an empty input at line 0, col 0, which Loki
                # prints without a position: `parse error : syntax error: unexpected $end`
                line = col = 0
            append(Token("$end", "", None, line, col))
            return toks
        c = text[i]
        start = i
        kind = None
        value = None
        tline = line
        err = None
        if c == "_" or c.isalpha():
            mm = _IDENT.match(text, i)
            if mm:
                j = mm.end()
                word = text[i:j]
                kind = _word_kind(text, word, j)
                value = word
                i = j
        if kind is not None:
            pass  # identifier, keyword or function word
        elif c in _ASCII_DIGITS or (c == "." and i + 1 < n and text[i + 1] in _ASCII_DIGITS):
            j, nerr = _scan_number(text, i)
            if nerr:
                err = nerr
            else:
                num = text[i:j]
                kind, value, i = _number_suffix(text, num, j)
                if kind != "NUMBER":
                    tline = 0
        elif c == '"':
            j, value, err = _scan_dq(text, i)
            kind = "STRING"
            i = j
        elif c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                err = "literal not terminated"
            else:
                value = text[i + 1:j]
                kind = "STRING"
                i = j + 1
        elif c == "[":
            j = text.find("]", i + 1)
            tline = 0
            if j < 0:
                err = "missing closing ']' in duration"
            else:
                try:
                    value = parse_prom_duration(text[i + 1:j])
                    kind = "RANGE"
                    i = j + 1
                except GoParseError as e:
                    err = str(e)
        elif c == "-":
            kind, value, i, tline = _minus(text, i, line)
        else:
            two = text[i:i + 2]
            if two in _TWO_CHAR:
                kind = two
                i += 2
                tline = 0
            else:
                kind = c if c in _ONE_CHAR else "IDENTIFIER"
                value = c
                i += 1
        if err is not None:
            append(Token("ERROR", "", ParseError(err, tline, col), tline, col))
            return toks
        if bad >= 0 and bad < i:
            append(Token("ERROR", "", ParseError("invalid UTF-8 encoding", line, col), line, col))
            return toks
        append(Token(kind, text[start:i], value, tline, col))
        if kind == "STRING" or kind == "RANGE":
            nl = text.count("\n", start, i)
            if nl:
                line += nl
                ls = text.rfind("\n", start, i) + 1


def _number_suffix(text: str, num: str, j: int) -> tuple[str, object, int]:
    """After a NUMBER: try a DURATION, then BYTES (spec §1.6b, §1.7)."""
    k = _DUR_RUN.match(text, j).end()
    if k > j:
        try:
            return "DURATION", parse_duration_token(num + text[j:k]), k
        except GoParseError:
            pass
    k = _BYTES_RUN.match(text, j).end()
    if k > j:
        try:
            return "BYTES", parse_bytes(num + text[j:k]), k
        except GoParseError:
            pass
    return "NUMBER", num, j


def _minus(text: str, i: int, line: int) -> tuple[str, object, int, int]:
    n = len(text)
    if i + 1 < n and text[i + 1] == "-":
        k = i + 1
        while k < n and (text[k] == "-" or text[k].isalpha()):
            k += 1
        flag = text[i:k]
        if flag in _FLAGS:
            return "FUNCTION_FLAG", flag, k, 0
    k = _DUR_RUN.match(text, i + 1).end()
    if k > i + 1:
        try:
            return "DURATION", parse_duration_token(text[i:k]), k, 0
        except GoParseError:
            pass
    return "-", "-", i + 1, line
