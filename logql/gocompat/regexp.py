"""Go ``regexp`` compatibility on top of google-re2: the one place regexes are compiled.

Loki compiles regexes with Go's ``regexp`` package; both are RE2, but the error texts differ
and C++ RE2 accepts a few things Go refuses (``\\C``, duplicate group names are checked by Loki
itself). ``go_regex_error(pattern)`` returns Go's error text (``error parsing regexp: ...``) or
None; ``compile_*`` return compiled regexes (cached where evaluation recompiles the same
pattern) and raise ``RegexError`` with Go's text.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any, Callable

import re2

from logql.gocompat.filters import PipelineError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would otherwise print every bad pattern to stderr

# C++ RE2 error text → Go regexp/syntax ErrorCode text.
_CODES = (
    ("missing ]", "missing closing ]"),
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
    ("duplicate capture group name", "duplicate capture group name"),
)

# Escapes C++ RE2 accepts but Go rejects (outside character classes).
_GO_BAD_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*(\\C)")


def _go_text(msg: str | bytes, pattern: str) -> str:
    """Go's `regexp.Compile` error text for an RE2 error message about `pattern` (an
    unbalanced group quotes the whole expression the user wrote, as Go does)."""
    msg = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
    if msg.startswith("missing )"):
        return f"error parsing regexp: missing closing ): `{pattern}`"
    if msg.startswith("trailing \\"):
        return "error parsing regexp: trailing backslash at end of expression: ``"
    for cpp, go in _CODES:
        if msg.startswith(cpp):
            arg = msg[len(cpp):]
            if arg.startswith(": "):
                arg = arg[2:]
            return f"error parsing regexp: {go}: `{arg}`"
    return "error parsing regexp: " + msg


class RegexError(PipelineError):
    """A regex that does not compile (the query answers 400 with Go's text)."""


def _re2(text: str, pattern: str) -> Any:
    """RE2-compile `text`, which is `pattern` or a wrapper of it; errors speak of `pattern`."""
    try:
        return re2.compile(text, options=_OPTIONS)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else str(exc)
        raise RegexError(_go_text(raw, pattern)) from None


def _go_named_groups(pattern: str) -> str:
    # Go accepts `(?<name>` as well as `(?P<name>`; older RE2 builds only the latter.
    if "(?<" in pattern:
        pattern = re.sub(r"\(\?<(?=[A-Za-z_])", "(?P<", pattern)
    return pattern


def compile_regexp(pattern: str) -> Any:
    """A Go-syntax regexp, uncached (parsers and template functions keep their own)."""
    return _re2(_go_named_groups(pattern), pattern)


def compile_anchored(pattern: str) -> Any:
    """``^(?:pattern)$`` (label matchers are fully anchored)."""
    try:
        return _re2("^(?:" + _go_named_groups(pattern) + ")$", pattern)
    except RegexError:
        compile_regexp(pattern)  # the user's own pattern's error, if it has one
        raise


@functools.lru_cache(maxsize=4096)
def go_regex_error(pattern: str) -> str | None:
    """Go's ``regexp.Compile`` error text for ``pattern``, or None when it compiles."""
    try:
        _re2(pattern, pattern)
    except RegexError as exc:
        return str(exc)
    except Exception:  # lone surrogates (raw bytes) cannot be encoded to UTF-8
        return "error parsing regexp: invalid UTF-8: `" + pattern.encode(
            "utf-8", "replace").decode("utf-8", "replace") + "`"
    m = _GO_BAD_ESCAPE.search(pattern)
    if m:
        return "error parsing regexp: invalid escape sequence: `\\C`"
    return None


# Compiled regexes are cached for the next query, but only small ones: RE2 lets one program
# grow to 8 MiB, and 4096 cached giants would be gigabytes. Big programs compile per query.
_CACHE_MAX = 4096
_CACHE_PROGRAM_MAX = 4096   # RE2 instructions
_compiled: dict[tuple[str, bool | None], Any] = {}
_cache_lock = threading.Lock()


def _cached(key: tuple[str, bool | None], build: Callable[[], Any]) -> Any:
    found = _compiled.get(key)
    if found is None:
        found = build()
        if found.programsize <= _CACHE_PROGRAM_MAX:
            with _cache_lock:  # reader threads compile concurrently
                if len(_compiled) >= _CACHE_MAX:
                    _compiled.pop(next(iter(_compiled)))  # the oldest goes
                _compiled[key] = found
    return found


def compile_full(pattern: str, dot_nl: bool):
    """Anchored regex for label matching: Prometheus selectors use ``(?s)`` (``dot_nl``),
    label filters use Go's Perl flags where ``.`` does not match a newline."""
    flags = "(?s:" if dot_nl else "(?:"
    return _cached((pattern, dot_nl), lambda: _re2("^" + flags + pattern + ")$", pattern))


def compile_search(pattern: str):
    """Unanchored regex (line filters ``|~``, ``| regexp``)."""
    return _cached((pattern, None), lambda: _re2(pattern, pattern))


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


# -- which label-filter regexes Loki prints between backquotes ------------------------------
#
# Loki turns `name=~"re"` into literal matching when Go's regexp/syntax, after parsing
# (which factors alternations: `abc|abd` -> `ab[c-d]`, `a|b` -> `[a-b]`) and Simplify, gives
# a literal, `.*`, `.+`, an alternation of literals, or a literal between `.*`s; otherwise it
# keeps a regexp filter, whose String() is the regex between backquotes. This reproduces that
# decision for the shapes Go's factoring produces from literal alternatives.

_META = frozenset(".^$*+?()[]{}|\\")


def _plain_literal(text: str) -> str | None:
    """The literal `text` matches, or None if it has any regex operator (escaped
    punctuation counts as literal, `\\d` and friends do not)."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 < len(text) and not text[i + 1].isalnum():
                out.append(text[i + 1])
                i += 2
                continue
            return None
        if c in _META:
            return None
        out.append(c)
        i += 1
    return "".join(out)


def _top_level_branches(text: str) -> list[str] | None:
    """`a|b|c` split at top level; None when there is any group or class inside."""
    branches, current, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if c in "()[]":
            return None
        if c == "|":
            branches.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    branches.append("".join(current))
    return branches


def _branch(text: str) -> tuple[bool, str, bool] | None:
    """A branch `[.*]literal[.*]` as (leading .*, literal, trailing .*), else None."""
    lead = text.startswith(".*")
    core = text[2:] if lead else text
    trail = core.endswith(".*") and not core.endswith("\\.*")
    core = core[:-2] if trail else core
    lit = _plain_literal(core)
    return None if lit is None else (lead, lit, trail)


def _factors_to_literals(branches: list[tuple[bool, str, bool]]) -> bool:
    """Whether Go's alternation factoring of these branches leaves only literals, empty
    matches, `.*`s and literal prefixes (never a character class)."""
    parts: list = []
    i = 0
    while i < len(branches):
        lead, prefix, _ = branches[i]
        j = i + 1
        while not lead and j < len(branches) and not branches[j][0]:
            other = branches[j][1]
            common = 0
            while common < min(len(prefix), len(other)) and prefix[common] == other[common]:
                common += 1
            if not common:
                break
            prefix, j = prefix[:common], j + 1
        if j - i >= 2:
            parts.append([(False, b[1][len(prefix):], b[2]) for b in branches[i:j]])
        else:
            parts.append(branches[i])
        i = j
    single = 0  # a run of two single-rune literals becomes a character class
    for part in parts:
        one_rune = isinstance(part, tuple) and not part[0] and not part[2] and len(part[1]) == 1
        single = single + 1 if one_rune else 0
        if single >= 2:
            return False
    return all(_factors_to_literals(part) for part in parts if isinstance(part, list))


def label_regex_is_literal(regex: str) -> bool:
    """Loki would match this label regex with literal filters (printed double-quoted)."""
    text = regex[4:] if regex.startswith("(?i)") else regex
    while len(text) >= 2 and text[0] == "(" and text[-1] == ")" and \
            _top_level_branches(text[1:-1].removeprefix("?:")) is not None:
        text = text[1:-1].removeprefix("?:")
    if text in ("", ".*", ".+"):
        return True
    branches = _top_level_branches(text)
    if branches is None:
        return False
    parsed = [_branch(b) for b in branches]
    if any(b is None for b in parsed):
        return False
    if len(parsed) == 1:
        return bool(parsed[0][1])
    return _factors_to_literals(parsed)
