"""Parser stages `| logfmt`, `| regexp`, `| pattern` (logql.md §5.3, §5.4). `| json` and
`| unpack` live in stages_json, the key rules shared by all parsers in stages_keys.

Common rules implemented here:
* label keys are sanitised (§5.3) -- results are cached per key text;
* a name that is a stream label or structured metadata of the entry gets the
  `_extracted` suffix;
* parsers without explicit extractions skip names already written this entry
  (first extraction wins, §5.4.7);
* parsers never drop lines and never raise: failures become `__error__`.
"""

from __future__ import annotations

import re
from json.decoder import scanstring

from logql.gocompat.filters import PipelineError
from logql.gocompat.regexp import RegexError, compile_regexp
from logql.pipeline.builder import EXTRACTED_SUFFIX, LOGFMT_PARSER_ERR
from logql.pipeline.keys import LABEL_NAME, fix_surrogates, set_parsed, sanitize_key
from logql.pipeline.json_parser import (  # noqa: F401 (one import place for parsers)
    JsonParser, UnpackParser, json_path_lookup, parse_json_path,
)
from logql.pipeline.line import parse_pattern


# --------------------------------------------------------------------------- logfmt

# A line made only of well-formed pairs; possessive quantifiers stop a value
# from being split to make a malformed line look well-formed.
_QUOTED_BODY = r'[^"\\]*+(?:\\.[^"\\]*+)*+'  # unrolled: much faster than (?:[^"\\]|\\.)*
_LOGFMT_LINE = re.compile(
    r'(?:[\x00- ]*+[^\x00- ="]++(?:=(?:"' + _QUOTED_BODY + r'"|[^\x00- ="]*+))?+)*+[\x00- ]*+', re.S
)
_LOGFMT_PAIR = re.compile(r'([^\x00- ="]++)(?:(=)(?:"(' + _QUOTED_BODY + r')"|([^\x00- ="]*+)))?+', re.S)


def _byte_pos(line: str, pos: int) -> int:
    return len(line[:pos].encode("utf-8", "surrogatepass"))


def scan_logfmt(line: str, strict: bool) -> tuple[list[tuple[str, str]], str | None]:
    """All (key, value) pairs of a logfmt line and, for strict mode, the first
    syntax error text (`logfmt syntax error at pos N : msg`)."""
    if "\ufffd" not in line and _LOGFMT_LINE.fullmatch(line):
        pairs = []
        for key, eq, quoted, raw in _LOGFMT_PAIR.findall(line):
            if quoted and "\\" in quoted:
                try:
                    quoted = fix_surrogates(scanstring(quoted + '"', 0)[0])
                except ValueError:
                    return _scan_logfmt_exact(line, strict)
            pairs.append((key, quoted or raw))
        return pairs, None
    return _scan_logfmt_exact(line, strict)


def _scan_logfmt_exact(line: str, strict: bool) -> tuple[list[tuple[str, str]], str | None]:
    """Character-level go-logfmt scanner; on an error non-strict mode skips to
    the next whitespace and continues, strict mode stops."""
    pairs: list[tuple[str, str]] = []
    n = len(line)
    pos = 0
    first_error: str | None = None
    while True:
        while pos < n and line[pos] <= " ":
            pos += 1
        if pos >= n:
            return pairs, first_error
        err_at = -1
        err_msg = ""
        start = pos
        while pos < n:
            c = line[pos]
            if c == "=" or c == '"' or c <= " ":
                break
            pos += 1
        key = line[start:pos]
        if pos < n and (line[pos] == '"' or (line[pos] == "=" and pos == start)):
            err_at, err_msg = pos, f"unexpected {line[pos]!r}"
        elif "\ufffd" in key:
            err_at, err_msg = pos, "invalid key"
        elif pos >= n or line[pos] <= " ":
            pairs.append((key, ""))
            continue
        else:
            pos += 1  # '='
            if pos >= n or line[pos] <= " ":
                pairs.append((key, ""))
                continue
            if line[pos] == '"':
                j = pos + 1
                esc = has_esc = False
                while j < n:
                    c = line[j]
                    if esc:
                        esc = False
                    elif c == "\\":
                        esc = has_esc = True
                    elif c == '"':
                        break
                    j += 1
                if j >= n:
                    err_at, err_msg, pos = n, "unterminated quoted value", n
                else:
                    value = line[pos + 1:j]
                    pos = j + 1
                    if has_esc:
                        try:
                            value = fix_surrogates(scanstring(value + '"', 0)[0])
                        except ValueError:
                            err_at, err_msg = pos, "invalid quoted value"
                    if err_at < 0:
                        pairs.append((key, value))
                        continue
            else:
                vstart = pos
                while pos < n:
                    c = line[pos]
                    if c == "=" or c == '"':
                        err_at, err_msg = pos, f"unexpected {c!r}"
                        break
                    if c <= " ":
                        break
                    pos += 1
                if err_at < 0:
                    pairs.append((key, line[vstart:pos]))
                    continue
        # syntax error
        if first_error is None:
            first_error = f"logfmt syntax error at pos {_byte_pos(line, err_at) + 1} : {err_msg}"
        if strict:
            return pairs, first_error
        pos = max(pos, err_at)
        while pos < n and line[pos] > " ":
            pos += 1


class LogfmtParser:
    """`| logfmt [--strict] [--keep-empty] [a="key", b]`.

    `extractions`: list of (label_name, key) or None for "all keys".
    """

    __slots__ = ("strict", "keep_empty", "extractions", "_by_key", "_names", "only")

    def __init__(self, strict: bool = False, keep_empty: bool = False,
                 extractions: list[tuple[str, str]] | None = None,
                 only: frozenset[str] | None = None):
        # `only`: the labels the rest of the query reads; other keys are not extracted
        self.only = only
        self.strict = strict
        self.keep_empty = keep_empty
        self.extractions = list(extractions) if extractions else None
        self._by_key: dict[str, list[str]] | None = None
        self._names: dict[str, str] = {}  # raw key -> sanitised label name
        if self.extractions:
            by_key: dict[str, list[str]] = {}
            for name, key in self.extractions:
                if not LABEL_NAME.fullmatch(name):
                    raise PipelineError(f"invalid extracted label name '{name}'")
                if not key or any(c <= " " or c in '="' for c in key):
                    raise PipelineError(f"cannot parse expression [{key}]: invalid key")
                by_key.setdefault(key, []).append(name)
            self._by_key = by_key

    def process(self, ts: int, line: str, labels) -> str | None:
        pairs, error = scan_logfmt(line, self.strict)
        if self._by_key is None:
            keep_empty = self.keep_empty
            stream, sm, extracted, parsed = labels.stream, labels.sm, labels.extracted, labels.parsed
            names = self._names
            only = self.only
            for key, value in pairs:
                if not value and not keep_empty:
                    continue
                name = names.get(key)
                if name is None:
                    name = sanitize_key(key)
                    if len(names) < 4096:
                        names[key] = name
                if not name or (only is not None and name not in only
                                and name + EXTRACTED_SUFFIX not in only):
                    continue
                if name in stream or name in sm or name[0] == "_":
                    # rare cases (collision, `__error__` keys): the general path
                    if name in stream or name in sm:
                        name += EXTRACTED_SUFFIX
                    if name not in extracted:
                        labels.set_extracted(name, value)
                    continue
                if name in extracted:
                    continue
                extracted.add(name)  # inlined set_extracted: this loop is the hot path
                parsed[name] = value
        else:
            self._process_extractions(pairs, labels)
        if error is not None and self.strict:
            labels.set_error(LOGFMT_PARSER_ERR, error)
        return line

    def _process_extractions(self, pairs, labels) -> None:
        by_key = self._by_key
        for names in by_key.values():
            for name in names:
                if not labels.base_has(name):
                    labels.set_extracted(name, "")
        seen: set[str] = set()
        for key, value in pairs:
            names = by_key.get(key)
            if names is None or key in seen:
                continue
            seen.add(key)  # first occurrence of a key wins
            for name in names:
                target = name + EXTRACTED_SUFFIX if labels.base_has(name) else name
                labels.set_extracted(target, value)

    def __repr__(self) -> str:
        return f"LogfmtParser(strict={self.strict}, keep_empty={self.keep_empty}, extractions={self.extractions!r})"


# --------------------------------------------------------------------------- regexp

def _capture_names(pattern: str) -> list[tuple[int, str]]:
    """(group number, name) of every named group of an RE2-valid pattern."""
    out: list[tuple[int, str]] = []
    group = 0
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("Q", i + 1):  # \Q...\E quotes everything
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):  # a leading ] is literal
                i += 1
            continue
        if c == "(":
            if pattern.startswith("(?P<", i) or (pattern.startswith("(?<", i) and not pattern.startswith("(?<=", i)
                                                 and not pattern.startswith("(?<!", i)):
                start = pattern.index("<", i) + 1
                end = pattern.index(">", start)
                group += 1
                out.append((group, pattern[start:end]))
                i = end + 1
                continue
            if not pattern.startswith("(?", i):
                group += 1
        i += 1
    return out


class RegexpParser:
    """`| regexp "re"`: named groups of the leftmost match become labels."""

    __slots__ = ("pattern", "_regex", "_names")

    def __init__(self, pattern: str):
        self.pattern = pattern
        try:
            self._regex = compile_regexp(pattern)
        except RegexError as exc:
            raise PipelineError(f"invalid regexp parser: {exc}") from None
        names: list[tuple[int, str]] = []
        seen: set[str] = set()
        # Go allows a group name twice (RE2's groupindex hides it); Loki rejects it
        for index, group_name in _capture_names(pattern):
            name = sanitize_key(group_name)
            if name in seen:
                raise PipelineError(f"invalid regexp parser: duplicate extracted label name '{name}'")
            seen.add(name)
            names.append((index, name))
        if not names:
            raise PipelineError("invalid regexp parser: at least one named capture must be supplied")
        self._names = tuple(names)

    def process(self, ts: int, line: str, labels) -> str | None:
        m = self._regex.search(line)
        if m is None:
            return line
        for index, name in self._names:
            set_parsed(labels, name, m.group(index) or "")
        return line

    def __repr__(self) -> str:
        return f"RegexpParser({self.pattern!r})"


# --------------------------------------------------------------------------- pattern

class PatternParser:
    """`| pattern "<ip> - <_> [<ts>] ..."` (§5.4.6): anchored, no backtracking."""

    __slots__ = ("pattern", "_lead", "_steps", "_names")

    def __init__(self, pattern: str):
        self.pattern = pattern
        try:
            elements = parse_pattern(pattern)
        except PipelineError as exc:
            raise PipelineError(f"invalid pattern parser: {exc}") from None
        if not any(kind == "cap" and v != "_" for kind, v in elements):
            raise PipelineError("invalid pattern parser: at least one capture is required")
        self._lead = elements[0][1] if elements[0][0] == "lit" else None
        rest = elements[1:] if self._lead is not None else elements
        # after the optional leading literal: capture (literal capture)* [literal]
        steps = []
        for i in range(0, len(rest), 2):
            capture = rest[i][1]
            literal = rest[i + 1][1] if i + 1 < len(rest) else None
            steps.append((None if capture == "_" else capture, literal))
        self._steps = tuple(steps)

    def matches(self, line: str) -> list[tuple[str, str]]:
        """(name, value) for each named capture matched, in pattern order."""
        out: list[tuple[str, str]] = []
        if not line:
            return out
        pos = 0
        if self._lead is not None:
            if not line.startswith(self._lead):
                return out
            pos = len(self._lead)
        for name, literal in self._steps:
            if literal is None:  # trailing capture takes the rest
                if name is not None:
                    out.append((name, line[pos:]))
                return out
            at = line.find(literal, pos)
            if at < 0:
                if name is not None:
                    out.append((name, line[pos:]))
                return out
            if name is not None:
                out.append((name, line[pos:at]))
            pos = at + len(literal)
        return out

    def process(self, ts: int, line: str, labels) -> str | None:
        for name, value in self.matches(line):
            set_parsed(labels, name, value)
        return line

    def __repr__(self) -> str:
        return f"PatternParser({self.pattern!r})"




__all__ = ["JsonParser", "LogfmtParser", "RegexpParser", "PatternParser", "UnpackParser",
           "sanitize_key", "scan_logfmt", "parse_json_path", "json_path_lookup"]
