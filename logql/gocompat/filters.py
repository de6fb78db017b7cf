"""Value conversions and matchers shared by pipeline stages.

Everything here reproduces the Go functions Loki relies on, including their
error texts, because those texts end up in `__error_details__` and in 400
responses: Go `regexp` compile errors, `strconv.ParseFloat`,
`time.ParseDuration`, go-humanize `ParseBytes`, and Loki's `ip()` matching.
"""

from __future__ import annotations

import ipaddress
import re

import re2

from logql.errors import QueryError
from logql.gocompat.format import go_quote
from logql.gocompat.regexp import RE2_OPTIONS, translate_re2_error


class PipelineError(QueryError, ValueError):
    """A stage could not be built (the query answers 400 with this text)."""


# --------------------------------------------------------------------------- regexps

_RE2_OPTIONS = RE2_OPTIONS

class RegexError(PipelineError):
    pass


def go_regexp_error(pattern: str, exc: Exception) -> str:
    """Render an RE2 compile error the way Go's regexp package does."""
    raw = exc.args[0] if exc.args else str(exc)
    return translate_re2_error(raw, pattern)


def _go_named_groups(pattern: str) -> str:
    # Go accepts `(?<name>` as well as `(?P<name>`; older RE2 builds only the latter.
    if "(?<" in pattern:
        pattern = re.sub(r"\(\?<(?=[A-Za-z_])", "(?P<", pattern)
    return pattern


def compile_regexp(pattern: str):
    """Compile a Go-syntax regexp with RE2; raises RegexError with Go's text."""
    try:
        return re2.compile(_go_named_groups(pattern), _RE2_OPTIONS)
    except re2.error as exc:
        raise RegexError(go_regexp_error(pattern, exc)) from None


def compile_anchored(pattern: str):
    """Compile `^(?:pattern)$` (label matchers are fully anchored)."""
    try:
        return re2.compile("^(?:" + _go_named_groups(pattern) + ")$", _RE2_OPTIONS)
    except re2.error as exc:
        # report the user's pattern, not our wrapper
        try:
            re2.compile(_go_named_groups(pattern), _RE2_OPTIONS)
        except re2.error as inner:
            raise RegexError(go_regexp_error(pattern, inner)) from None
        raise RegexError(go_regexp_error(pattern, exc)) from None


# --------------------------------------------------------------------------- ip()

class IpMatcher:
    """Loki's `ip("...")` pattern: address, CIDR or inclusive range `A-B`."""

    __slots__ = ("pattern", "_net", "_lo", "_hi")

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._net = None
        self._lo = self._hi = None
        try:
            if "/" in pattern:
                self._net = ipaddress.ip_network(pattern.strip(), strict=False)
            elif "-" in pattern:
                lo, hi = pattern.split("-", 1)
                self._lo = ipaddress.ip_address(lo.strip())
                self._hi = ipaddress.ip_address(hi.strip())
                if self._lo.version != self._hi.version or self._lo > self._hi:
                    raise ValueError
            else:
                self._lo = self._hi = ipaddress.ip_address(pattern.strip())
        except ValueError:
            raise PipelineError(f"ip: invalid pattern: {go_quote(pattern)}") from None

    def contains(self, addr) -> bool:
        if self._net is not None:
            return addr.version == self._net.version and addr in self._net
        return addr.version == self._lo.version and self._lo <= addr <= self._hi

    def contains_text(self, text: str) -> bool:
        """True when `text` parses as an address inside the pattern."""
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            return False
        return self.contains(addr)

    # A candidate starts where an IPv4 address (digit, then a '.' within the
    # next three characters) or an IPv6 address (`::h`, `h:` .. `hhhh:`) could.
    _START = re.compile(r"\d[^.]{0,2}\.|::[0-9a-fA-F]|[0-9a-fA-F]{1,4}:")
    _V4_START = re.compile(r"\d[^.]{0,2}\.")
    _V4_RUN = re.compile(r"[0-9.]+")
    _V6_RUN = re.compile(r"[0-9a-fA-F:.]+")

    def search_line(self, line: str) -> bool:
        """Some address found while scanning `line` lies inside the pattern (§5.1)."""
        pos = 0
        n = len(line)
        start_re, v4_start, v4_run, v6_run = self._START, self._V4_START, self._V4_RUN, self._V6_RUN
        while pos < n:
            m = start_re.search(line, pos)
            if m is None:
                return False
            at = m.start()
            run = (v4_run if v4_start.match(line, at) else v6_run).match(line, at)
            if run is None:  # v4 start whose first char begins no [0-9.] run cannot happen; be safe
                pos = at + 1
                continue
            if self.contains_text(run.group()):
                return True
            pos = run.end()
        return False
