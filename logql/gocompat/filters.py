"""The pipeline's error type and Loki's `ip()` matching, shared by pipeline stages.

`ip()` reproduces Loki's matcher, including its error text, because that text ends up in
400 responses (Go's regexps are in logql/gocompat/regexp.py, its value parsers in
logql/gocompat/values.py).
"""

from __future__ import annotations

import ipaddress
import re

from logql.errors import QueryError
from logql.gocompat.format import go_quote


class PipelineError(QueryError, ValueError):
    """A stage could not be built (the query answers 400 with this text)."""


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
