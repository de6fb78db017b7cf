"""Go ``regexp`` compatibility on top of google-re2.

Loki compiles regexes with Go's ``regexp`` package; both are RE2, but the error texts differ
and C++ RE2 accepts a few things Go refuses (``\\C``, duplicate group names are checked by Loki
itself). ``go_regex_error(pattern)`` returns Go's error text (``error parsing regexp: ...``) or
None; ``compile_*`` return cached compiled regexes for evaluation.
"""

from __future__ import annotations

import functools
import re

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

# C++ RE2 error text → Go regexp/syntax ErrorCode text.
_CODES = (
    ("missing ]", "missing closing ]"),
    ("missing )", "missing closing )"),
    ("unexpected )", "unexpected )"),
    ("invalid escape sequence", "invalid escape sequence"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("invalid repetition size", "invalid repeat count"),
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("invalid named capture group", "invalid named capture"),
    ("invalid UTF-8", "invalid UTF-8"),
    ("pattern too large", "expression too large"),
    ("bad named capture group", "invalid named capture"),
)

# Escapes C++ RE2 accepts but Go rejects (outside character classes).
_GO_BAD_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*(\\C)")


def _translate(msg: str) -> str:
    if msg.startswith("trailing \\"):
        return "error parsing regexp: trailing backslash at end of expression: ``"
    for cpp, go in _CODES:
        if msg.startswith(cpp):
            arg = msg[len(cpp):]
            if arg.startswith(": "):
                arg = arg[2:]
            return f"error parsing regexp: {go}: `{arg}`"
    return "error parsing regexp: " + msg


@functools.lru_cache(maxsize=4096)
def go_regex_error(pattern: str) -> str | None:
    """Go's ``regexp.Compile`` error text for ``pattern``, or None when it compiles."""
    try:
        re2.compile(pattern, options=_OPTIONS)
    except re2.error as e:
        raw = e.args[0] if e.args else str(e)
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "replace")
        return _translate(str(raw))
    except Exception:  # lone surrogates (raw bytes) cannot be encoded to UTF-8
        return "error parsing regexp: invalid UTF-8: `" + pattern.encode(
            "utf-8", "replace").decode("utf-8", "replace") + "`"
    m = _GO_BAD_ESCAPE.search(pattern)
    if m:
        return "error parsing regexp: invalid escape sequence: `\\C`"
    return None


@functools.lru_cache(maxsize=4096)
def compile_full(pattern: str, dot_nl: bool):
    """Anchored regex for label matching: Prometheus selectors use ``(?s)`` (``dot_nl``),
    label filters use Go's Perl flags where ``.`` does not match a newline."""
    flags = "(?s:" if dot_nl else "(?:"
    return re2.compile("^" + flags + pattern + ")$", options=_OPTIONS)


@functools.lru_cache(maxsize=4096)
def compile_search(pattern: str):
    """Unanchored regex (line filters ``|~``, ``| regexp``)."""
    return re2.compile(pattern, options=_OPTIONS)


_NAMED_GROUP = re.compile(r"\(\?P?<([^>]*)>")


def capture_names(pattern: str) -> list[str]:
    """Named groups in order of appearance, duplicates kept (RE2's groupindex drops them)."""
    names = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            # a leading ']' (or '^]') is a literal inside the class
            if pattern.startswith("]", i + 1):
                i += 1
            elif pattern.startswith("^]", i + 1):
                i += 2
        elif c == "(":
            m = _NAMED_GROUP.match(pattern, i)
            if m:
                names.append(m.group(1))
                i = m.end()
                continue
        i += 1
    return names


def num_groups(pattern: str) -> int:
    return compile_search(pattern).groups
