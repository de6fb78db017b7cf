"""Minimal stream-selector reader for the label APIs, until the full LogQL parser lands.

Only `{name op "value", ...}` with = != =~ !~. Replaced by logql.parser.parse_selector.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import re2


class SelectorError(ValueError):
    pass


@dataclass(frozen=True)
class LabelMatcher:
    name: str
    op: str
    value: str
    _regex: object = field(default=None, compare=False, repr=False)

    def matches(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        rx = self._regex
        if rx is None:
            rx = re2.compile(f"^(?:{self.value})$")
            object.__setattr__(self, "_regex", rx)
        hit = rx.search(value) is not None
        return hit if self.op == "=~" else not hit


_TOKEN = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|`[^`]*`)\s*(,|})')


def parse_selector(text: str, require_non_empty: bool = True) -> tuple[LabelMatcher, ...]:
    s = text.strip()
    if not s.startswith("{"):
        raise SelectorError("only label matchers are supported")
    pos, out = 1, []
    if s[1:].strip() == "}":
        if require_non_empty:
            raise SelectorError("queries require at least one regexp or equality matcher "
                                "that does not have an empty-compatible value. For instance, "
                                "app=~\".*\" does not meet this requirement, but app=~\".+\" will")
        return ()
    while True:
        m = _TOKEN.match(s, pos)
        if not m:
            raise SelectorError("only label matchers are supported")
        raw = m.group(3)
        value = raw[1:-1] if raw.startswith("`") else _unquote(raw)
        matcher = LabelMatcher(m.group(1), m.group(2), value)
        if matcher.op in ("=~", "!~"):
            try:
                matcher.matches("")
            except re2.error as exc:
                raise SelectorError(f"invalid regex {value!r}: {exc}") from None
        out.append(matcher)
        pos = m.end()
        if m.group(4) == "}":
            break
    if s[pos:].strip():
        raise SelectorError("only label matchers are supported")
    if require_non_empty and all(x.matches("") for x in out):
        raise SelectorError("queries require at least one regexp or equality matcher that does "
                            "not have an empty-compatible value. For instance, app=~\".*\" does "
                            "not meet this requirement, but app=~\".+\" will")
    return tuple(out)


def _unquote(raw: str) -> str:
    import json
    try:
        return json.loads(raw)
    except ValueError:
        raise SelectorError(f"invalid string {raw}") from None
