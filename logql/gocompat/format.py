"""Go-compatible text rendering used by the canonical printer.

Loki prints its AST with Go's ``strconv``/``fmt``/``time`` helpers, so the canonical query text
depends on their exact output (``1e+06``, ``1h0m0s``, ``210MB``...). These functions reproduce
them; they never raise for any input of the documented type.
"""

from __future__ import annotations

import math
import re

_SAFE_ASCII = re.compile(r'[ !#-\[\]-~]*\Z')
_SIMPLE_ESC = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    "\v": "\\v", "\\": "\\\\", '"': '\\"',
}


def go_quote(s: str) -> str:
    """``strconv.Quote``: printable runes kept, everything else escaped the Go way."""
    if _SAFE_ASCII.match(s):
        return '"' + s + '"'
    out = ['"']
    for ch in s:
        esc = _SIMPLE_ESC.get(ch)
        if esc is not None:
            out.append(esc)
            continue
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:
            # A raw byte smuggled through surrogateescape: Go prints invalid bytes as \xNN.
            out.append("\\x%02x" % (cp - 0xDC00))
        elif 0xD800 <= cp <= 0xDFFF:
            out.append("\\ufffd")
        elif ch.isprintable():
            out.append(ch)
        elif cp < 0x20 or cp == 0x7F:
            out.append("\\x%02x" % cp)
        elif cp < 0x10000:
            out.append("\\u%04x" % cp)
        else:
            out.append("\\U%08x" % cp)
    out.append('"')
    return "".join(out)


def _shortest(a: float) -> tuple[str, int]:
    """Shortest round-trip digits of a positive finite float and the decimal point position
    (value = 0.DIGITS * 10**dp). Python's repr and Go's shortest formatting agree on digits."""
    s = repr(a)
    if "e" in s:
        m, e = s.split("e")
        exp = int(e)
    else:
        m, exp = s, 0
    ip, _, fp = m.partition(".")
    if fp == "0":
        fp = ""
    digits = ip + fp
    dp = len(ip) + exp
    stripped = digits.lstrip("0")
    dp -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    return digits, dp


def _fixed(digits: str, dp: int) -> str:
    if dp <= 0:
        return "0." + "0" * (-dp) + digits
    if dp >= len(digits):
        return digits + "0" * (dp - len(digits))
    return digits[:dp] + "." + digits[dp:]


def _special(v: float) -> str | None:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return None


def format_float_v(v: float) -> str:
    """``fmt.Sprint(float64)``: shortest ``%g`` (``2``, ``0.5``, ``1e+06``, ``1e-05``)."""
    sp = _special(v)
    if sp is not None:
        return sp
    if v == 0:
        return "-0" if math.copysign(1.0, v) < 0 else "0"
    sign = "-" if v < 0 else ""
    digits, dp = _shortest(abs(v))
    exp = dp - 1
    # strconv's %g with shortest precision switches to %e at exponent >= 6 (ftoa.go).
    if exp < -4 or exp >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        es = "-" if exp < 0 else "+"
        return "%s%se%s%02d" % (sign, mant, es, abs(exp))
    return sign + _fixed(digits, dp)


def format_float_f(v: float) -> str:
    """``strconv.FormatFloat(v, 'f', -1, 64)``: shortest digits, never an exponent."""
    sp = _special(v)
    if sp is not None:
        return sp
    if v == 0:
        return "-0" if math.copysign(1.0, v) < 0 else "0"
    sign = "-" if v < 0 else ""
    digits, dp = _shortest(abs(v))
    return sign + _fixed(digits, dp)


def format_float_6(v: float) -> str:
    """``fmt.Sprintf("%f", v)``."""
    sp = _special(v)
    if sp is not None:
        return sp
    return "%.6f" % v


def _frac(u: int, prec: int) -> tuple[str, int]:
    p = 10 ** prec
    whole, frac = divmod(u, p)
    if frac == 0:
        return "", whole
    return "." + ("%0*d" % (prec, frac)).rstrip("0"), whole


def go_duration_str(d: int) -> str:
    """``time.Duration.String()`` for integer nanoseconds."""
    if d == 0:
        return "0s"
    neg = d < 0
    u = -d if neg else d
    if u < 1_000_000_000:
        if u < 1000:
            s = "%dns" % u
        elif u < 1_000_000:
            f, w = _frac(u, 3)
            s = "%d%sµs" % (w, f)
        else:
            f, w = _frac(u, 6)
            s = "%d%sms" % (w, f)
    else:
        f, secs = _frac(u, 9)
        h, rem = divmod(secs, 3600)
        m, sec = divmod(rem, 60)
        if h:
            s = "%dh%dm%d%ss" % (h, m, sec, f)
        elif m:
            s = "%dm%d%ss" % (m, sec, f)
        else:
            s = "%d%ss" % (sec, f)
    return "-" + s if neg else s


_PROM_UNITS = (
    ("y", 1000 * 60 * 60 * 24 * 365, True),
    ("w", 1000 * 60 * 60 * 24 * 7, True),
    ("d", 1000 * 60 * 60 * 24, False),
    ("h", 1000 * 60 * 60, False),
    ("m", 1000 * 60, False),
    ("s", 1000, False),
    ("ms", 1, False),
)


def prom_duration_str(d: int) -> str:
    """Prometheus ``model.Duration.String()`` (millisecond resolution) for nanoseconds."""
    ms = d // 1_000_000
    if ms == 0:
        return "0s"
    out = []
    for unit, mult, exact in _PROM_UNITS:
        if exact and ms % mult != 0:
            continue
        v = ms // mult
        if v > 0:
            out.append("%d%s" % (v, unit))
            ms -= v * mult
    return "".join(out)


_SI_SIZES = ("B", "kB", "MB", "GB", "TB", "PB", "EB")


def humanize_bytes(n: int) -> str:
    """go-humanize ``Bytes(n)`` with the space removed (what Loki prints for bytes filters).

    Above 1000TB the value stays in TB: Loki's ``1.0PB``/``1.0EB`` cannot be read back by its
    own lexer (Go's scanner takes ``P``/``E`` for an exponent)."""
    if n < 10:
        return "%dB" % n
    e = min(math.floor(math.log(n) / math.log(1000)), 4)
    suffix = _SI_SIZES[int(e)]
    val = math.floor(n / (1000 ** e) * 10 + 0.5) / 10
    if val < 10:
        return "%.1f%s" % (val, suffix)
    return "%.0f%s" % (val, suffix)
