"""Prometheus label-set text (`{app="api", env="prod"}`) as sent in protobuf pushes.

Errors read like Prometheus' own (`1:3: parse error: unexpected character inside braces:
'-'`) because that is what Loki answers and what users search for.
"""

from __future__ import annotations

LABEL_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
LABEL_CHARS = LABEL_START | set("0123456789")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


class LabelSetError(ValueError):
    pass


def is_valid_label_name(name: str) -> bool:
    # an ASCII identifier is exactly [A-Za-z_][A-Za-z0-9_]*, and both tests run in C (once
    # per label of every pushed stream)
    return name.isascii() and name.isidentifier()


def _err(text: str, pos: int, message: str) -> LabelSetError:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return LabelSetError(f"{line}:{col}: parse error: {message}")


def parse_label_set(text: str) -> list[tuple[str, str]]:
    """Pairs in text order (duplicates kept: the caller reports them)."""
    n, i = len(text), 0

    def skip_ws(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    i = skip_ws(i)
    if i >= n or text[i] != "{":
        if i >= n:
            raise _err(text, i, "unexpected end of input")
        raise _err(text, i, f"unexpected character: {text[i]!r}")
    i += 1
    pairs: list[tuple[str, str]] = []
    while True:
        i = skip_ws(i)
        if i >= n:
            raise _err(text, i, "unexpected end of input inside braces")
        if text[i] == "}":
            i += 1
            break
        if text[i] not in LABEL_START:
            raise _err(text, i, f"unexpected character inside braces: {text[i]!r}")
        start = i
        while i < n and text[i] in LABEL_CHARS:
            i += 1
        name = text[start:i]
        i = skip_ws(i)
        if i >= n:
            raise _err(text, i, "unexpected end of input inside braces")
        if text[i] != "=":
            if text[i] in "!~" or text[i] in LABEL_CHARS:
                raise _err(text, i, f"unexpected character inside braces: {text[i]!r}")
            raise _err(text, i, f"unexpected character inside braces: {text[i]!r}")
        i = skip_ws(i + 1)
        if i >= n:
            raise _err(text, i, "unexpected end of input inside braces")
        if text[i] not in "\"'`":
            raise _err(text, i, f'unexpected character inside braces: {text[i]!r}')
        value, i = _read_string(text, i)
        pairs.append((name, value))
        i = skip_ws(i)
        if i < n and text[i] == ",":
            i += 1
            continue
        if i < n and text[i] == "}":
            i += 1
            break
        if i >= n:
            raise _err(text, i, "unexpected end of input inside braces")
        raise _err(text, i, f"unexpected character inside braces: {text[i]!r}")
    i = skip_ws(i)
    if i < n:
        raise _err(text, i, f"unexpected character after braces: {text[i]!r}")
    return pairs


def _read_string(text: str, i: int) -> tuple[str, int]:
    quote, start, n = text[i], i, len(text)
    i += 1
    out = []
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\" and quote != "`":
            if i + 1 >= n:
                break
            e = text[i + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                i += 2
                continue
            if e in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[e]
                digits = text[i + 2:i + 2 + width]
                try:
                    out.append(chr(int(digits, 16)) if len(digits) == width else "")
                except ValueError:
                    raise _err(text, i, "invalid escape sequence") from None
                if len(digits) != width:
                    raise _err(text, i, "invalid escape sequence")
                i += 2 + width
                continue
            raise _err(text, i, f"unknown escape sequence {e!r}")
        if c == "\n" and quote != "`":
            raise _err(text, i, "unterminated quoted string")
        out.append(c)
        i += 1
    raise _err(text, start, "unterminated quoted string")
