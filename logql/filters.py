"""Value conversions and matchers shared by pipeline stages.

Everything here reproduces the Go functions Loki relies on, including their
error texts, because those texts end up in `__error_details__` and in 400
responses: Go `regexp` compile errors, `strconv.ParseFloat`,
`time.ParseDuration`, go-humanize `ParseBytes`, and Loki's `ip()` matching.
"""

from __future__ import annotations

import ipaddress
import math
import re

import re2


class PipelineError(ValueError):
    """A stage could not be built (the query answers 400 with this text)."""


# --------------------------------------------------------------------------- regexps

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # RE2 would otherwise print every bad pattern to stderr

# RE2's error code texts -> Go regexp/syntax ErrorCode texts.
_RE2_TO_GO_ERRORS = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "no argument for repetition operator": "missing argument to repetition operator",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "trailing \\": "trailing backslash at end of expression",
    "invalid named capture group": "invalid named capture",
    "duplicate capture group name": "duplicate capture group name",
}


class RegexError(PipelineError):
    pass


def go_regexp_error(pattern: str, exc: Exception) -> str:
    """Render an RE2 compile error the way Go's regexp package does."""
    raw = exc.args[0] if exc.args else str(exc)
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    code, sep, arg = str(raw).partition(": ")
    code = _RE2_TO_GO_ERRORS.get(code, code)
    if not sep:
        return f"error parsing regexp: {code}"
    if code == "missing closing )":
        arg = pattern  # Go quotes the whole expression for an unbalanced group
    return f"error parsing regexp: {code}: `{arg}`"


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


# --------------------------------------------------------------------------- Go quoting

def go_quote(s: str) -> str:
    """Go strconv.Quote (printable non-ASCII kept as is)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif o == 0xFFFD or ch.isprintable():
            out.append(ch)
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


# --------------------------------------------------------------------------- ParseFloat

_DEC_FLOAT = re.compile(r"[+-]?(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d(?:_?\d)*)?")
_HEX_FLOAT = re.compile(
    r"[+-]?0[xX](?:_?[0-9a-fA-F])*(?:\.(?:[0-9a-fA-F](?:_?[0-9a-fA-F])*)?)?[pP][+-]?\d(?:_?\d)*"
)
_SPECIAL_FLOATS = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "infinity": math.inf,
                   "+infinity": math.inf, "-infinity": -math.inf, "nan": math.nan, "+nan": math.nan,
                   "-nan": math.nan}


def parse_go_float(s: str) -> float:
    """Go strconv.ParseFloat(s, 64); ValueError carries Go's error text."""
    try:
        # fast path: plain decimals are by far the most common label values
        if s and (s[0].isdigit() or s[0] == "-") and "_" not in s and s.isascii():
            v = float(s)
            if s[-1] not in "0123456789.":
                raise ValueError  # Python accepts "1e5 " style text Go does not
            if math.isinf(v):
                raise OverflowError
            return v
    except OverflowError:
        raise ValueError(f"strconv.ParseFloat: parsing {go_quote(s)}: value out of range") from None
    except ValueError:
        pass
    special = _SPECIAL_FLOATS.get(s.lower())
    if special is not None:
        return special
    if _DEC_FLOAT.fullmatch(s):
        v = float(s.replace("_", ""))
    elif _HEX_FLOAT.fullmatch(s):
        v = float.fromhex(s.replace("_", ""))
    else:
        raise ValueError(f"strconv.ParseFloat: parsing {go_quote(s)}: invalid syntax")
    if math.isinf(v):
        raise ValueError(f"strconv.ParseFloat: parsing {go_quote(s)}: value out of range")
    return v


# --------------------------------------------------------------------------- ParseDuration

_DURATION_UNITS = {
    "ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
    "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000,
}
_DURATION_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
_MAX_DURATION = (1 << 63) - 1


def parse_go_duration(s: str) -> int:
    """Go time.ParseDuration: returns nanoseconds; ValueError carries Go's text."""
    orig = s
    quoted = '"' + orig + '"'
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"time: invalid duration {quoted}")
    total_int = 0
    pos = 0
    while pos < len(s):
        if not (s[pos] == "." or s[pos].isdigit() and s[pos].isascii()):
            raise ValueError(f"time: invalid duration {quoted}")
        m = _DURATION_PART.match(s, pos)
        int_part, frac_part, unit = m.group(1), m.group(2), m.group(3)
        if not int_part and not frac_part:
            raise ValueError(f"time: invalid duration {quoted}")
        if not unit:
            raise ValueError(f"time: missing unit in duration {quoted}")
        scale = _DURATION_UNITS.get(unit)
        if scale is None:
            raise ValueError(f"time: unknown unit {go_quote(unit)} in duration {quoted}")
        whole = int(int_part or "0") * scale
        if frac_part:
            whole += int(frac_part) * scale // 10 ** len(frac_part)
        total_int += whole
        if total_int > _MAX_DURATION + (1 if neg else 0):
            raise ValueError(f"time: invalid duration {quoted}")
        pos = m.end()
    return -total_int if neg else total_int


# --------------------------------------------------------------------------- ParseBytes

_BYTES_TABLE = {"": 1, "b": 1}
for _i, (_si, _iec) in enumerate([("k", "ki"), ("m", "mi"), ("g", "gi"), ("t", "ti"), ("p", "pi"), ("e", "ei")], 1):
    _BYTES_TABLE[_si] = _BYTES_TABLE[_si + "b"] = 1000 ** _i
    _BYTES_TABLE[_iec] = _BYTES_TABLE[_iec + "b"] = 1024 ** _i


def parse_bytes(s: str) -> int:
    """go-humanize ParseBytes; ValueError carries its error text."""
    last = 0
    has_comma = False
    for ch in s:
        if not (ch.isdigit() or ch == "." or ch == ","):
            break
        if ch == ",":
            has_comma = True
        last += 1
    num = s[:last]
    if has_comma:
        num = num.replace(",", "")
    f = parse_go_float(num)
    extra = s[last:].strip().lower()
    mult = _BYTES_TABLE.get(extra)
    if mult is None:
        raise ValueError(f"unhandled size name: {extra}")
    f *= mult
    if f >= 2.0 ** 64:
        raise ValueError(f"too large: {s}")
    return int(f) if f >= 0 else 0


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
