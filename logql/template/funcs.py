"""Functions available to line_format / label_format templates (logql.md §8.2, §8.3).

Each entry of FUNCS is `Func(fn, params, variadic)`: parameter kinds are
"str", "int", "float", "bool", "time" or "any" and drive Go's argument type
checks (a label value, always a string, passed where an int is expected is a
"wrong type for value" error, as in Go). A function signals failure by raising
FuncError; the executor turns it into `error calling <name>: <msg>`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from decimal import Decimal, DivisionByZero, InvalidOperation, getcontext
from urllib.parse import quote_plus

from logql.gocompat.regexp import RegexError, compile_regexp
from logql.gocompat.format import go_quote
from logql.gocompat.values import go_parse_float as parse_go_float, parse_bytes, parse_go_duration
from logql.template.gotime import UTC, GoTime, load_zone, parse_layout


class FuncError(Exception):
    pass


class Func:
    __slots__ = ("fn", "params", "variadic")

    def __init__(self, fn, params=(), variadic=None):
        self.fn, self.params, self.variadic = fn, tuple(params), variadic


# --------------------------------------------------------------------------- value helpers

def type_name(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "<nil>"
    if isinstance(v, dict):
        return "map[string]interface {}"
    if isinstance(v, list):
        return "[]interface {}"
    if isinstance(v, GoTime):
        return "time.Time"
    return type(v).__name__


def format_float_g(f: float) -> str:
    """Go strconv.FormatFloat(f, 'g', -1, 64) -- what `%v` prints for float64."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exp = Decimal(repr(f)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    nd = len(ds)
    dp = nd + exp  # position of the decimal point relative to the digits
    x = dp - 1
    eprec = 6  # strconv: "if precision was the shortest possible, use precision 6 for this decision"
    s = "-" if sign else ""
    if x < -4 or x >= eprec:
        mant = ds[0] + ("." + ds[1:] if nd > 1 else "")
        return f"{s}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if dp <= 0:
        return f"{s}0.{'0' * -dp}{ds}"
    if dp >= nd:
        return f"{s}{ds}{'0' * (dp - nd)}"
    return f"{s}{ds[:dp]}.{ds[dp:]}"


def go_print(v, top: bool = True) -> str:
    """fmt.Sprint of a template value (`<no value>` for a top-level nil)."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_float_g(v)
    if v is None:
        return "<no value>" if top else "<nil>"
    if isinstance(v, list):
        return "[" + " ".join(go_print(x, False) for x in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_print(v[k], False)}" for k in sorted(v)) + "]"
    return str(v)


def truth(v) -> bool:
    if v is None:
        return False
    if isinstance(v, (bool, int, float, str, list, dict)):
        return bool(v)
    return True


def _to_int64(v) -> int:
    """sprig toInt64 (spf13/cast): strings parsed base 0, failures give 0."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if math.isfinite(v) else 0
    if isinstance(v, str):
        s = v
        if "." in s:
            head, _, tail = s.partition(".")
            if tail.strip("0") == "":
                s = head  # cast trims a zero decimal part: "3.0" -> 3
        try:
            t = s.replace("_", "")
            if t[:1] in "+-":
                sign, t = t[0], t[1:]
            else:
                sign = ""
            if len(t) > 1 and t[0] == "0" and t[1] not in "xXoObB":
                return int(sign + t, 8)
            return int(sign + t, 0)
        except (ValueError, IndexError):
            return 0
    return 0


def _to_float64(v) -> float:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return parse_go_float(v)
        except ValueError:
            return 0.0
    return 0.0


def _empty(v) -> bool:
    return not truth(v) if not isinstance(v, GoTime) else False


# --------------------------------------------------------------------------- strings

def go_title(s: str) -> str:
    """Go's strings.Title (sprig's and Prometheus' `title`)."""
    out, prev = [], " "
    for ch in s:
        out.append(ch.upper() if _is_separator(prev) else ch)
        prev = ch
    return "".join(out)


def _is_separator(ch: str) -> bool:
    if ch.isascii():
        return not (ch.isalnum() or ch == "_")
    if ch.isalpha() or ch.isdigit():
        return False
    return ch.isspace()


def _trunc(c: int, s: str) -> str:
    if c < 0 and len(s) + c > 0:
        return s[len(s) + c:]
    if c >= 0 and len(s) > c:
        return s[:c]
    return s


def _substr(start: int, end: int, s: str) -> str:
    if start < 0:
        if end < 0 or end > len(s):
            raise FuncError(f"runtime error: slice bounds out of range [:{end}] with length {len(s)}")
        return s[:end]
    if end < 0 or end > len(s):
        if start > len(s):
            raise FuncError(f"runtime error: slice bounds out of range [{start}:{len(s)}]")
        return s[start:]
    if start > end:
        raise FuncError(f"runtime error: slice bounds out of range [{start}:{end}]")
    return s[start:end]


# one template call may not build more than this (Go would try, and a gigabyte line takes
# the process with it)
MAX_REPEAT_BYTES = 16 << 20


def _repeat(n: int, s: str) -> str:
    if n < 0:
        raise FuncError("strings: negative Repeat count")
    if n * len(s) > MAX_REPEAT_BYTES:
        raise FuncError(f"strings: Repeat output length over {MAX_REPEAT_BYTES} bytes")
    return s * n


def _go_trim(s: str, cutset: str) -> str:
    return s.strip(cutset) if cutset else s


def _indent(n: int, s: str) -> str:
    pad = " " * n
    return pad + s.replace("\n", "\n" + pad)


def _align_left(n: int, s: str) -> str:
    if n < 0 or n == len(s):
        return s
    return s + " " * (n - len(s)) if n > len(s) else s[:n]


def _align_right(n: int, s: str) -> str:
    if n < 0 or n == len(s):
        return s
    return " " * (n - len(s)) + s if n > len(s) else s[len(s) - n:]


_B64 = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _b64dec(s: str) -> str:
    if len(s) % 4 in (2, 3):
        s += "=" * (4 - len(s) % 4)
    for i, ch in enumerate(s):
        if ch not in _B64 and not (ch == "=" and i >= len(s) - 2 and set(s[i:]) == {"="} and len(s) % 4 == 0):
            return f"illegal base64 data at input byte {i}"
    if len(s) % 4:
        return f"illegal base64 data at input byte {len(s) - len(s) % 4}"
    try:
        return base64.b64decode(s, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError) as exc:
        return str(exc)


def _urldecode(s: str) -> str:
    out = bytearray()
    i = 0
    raw = s.encode("utf-8")
    while i < len(raw):
        c = raw[i]
        if c == 0x25:  # %
            hexpart = raw[i + 1:i + 3]
            if len(hexpart) < 2 or any(ch not in b"0123456789abcdefABCDEF" for ch in hexpart):
                bad = raw[i:i + 3].decode("utf-8", "replace")
                raise FuncError(f"invalid URL escape {go_quote(bad)}")
            out.append(int(hexpart, 16))
            i += 3
        elif c == 0x2B:  # +
            out.append(0x20)
            i += 1
        else:
            out.append(c)
            i += 1
    return out.decode("utf-8", "replace")


# --------------------------------------------------------------------------- regexps

def func_regex(pattern: str):
    """A template function's regex: a bad one fails the call with Go's text."""
    try:
        return compile_regexp(pattern)
    except RegexError as exc:
        raise FuncError(str(exc)) from None


def _go_expand(template: str, m) -> str:
    """Go Regexp.Expand: $1, ${1}, $name, ${name}, $$ (unknown names give '')."""
    out, i, n = [], 0, len(template)
    while i < n:
        c = template[i]
        if c != "$" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = template[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
            continue
        if nxt == "{":
            end = template.find("}", i + 2)
            name = template[i + 2:end] if end > 0 else ""
            if end < 0 or not name or not all(ch.isalnum() or ch == "_" for ch in name):
                out.append(c)
                i += 1
                continue
            i = end + 1
        else:
            j = i + 1
            while j < n and (template[j].isalnum() or template[j] == "_"):
                j += 1
            name = template[i + 1:j]
            if not name:
                out.append(c)
                i += 1
                continue
            i = j
        out.append(_group(m, name))
    return "".join(out)


def _group(m, name: str) -> str:
    try:
        idx = int(name) if name.isdigit() else name
        return m.group(idx) or ""
    except (IndexError, KeyError, ValueError):
        return ""


def _all_matches(regex, s: str):
    """Go's FindAll/ReplaceAll iteration: an empty match right after a
    previous match is ignored; always advance by at least one character."""
    pos, last_end, n = 0, -1, len(s)
    while pos <= n:
        m = regex.search(s, pos)
        if m is None:
            return
        a, b = m.span()
        if not (a == b and a == last_end):
            yield m
        last_end = b
        pos = b if b > pos else pos + 1


def regex_replace_all(pattern: str, s: str, repl: str, literal: bool) -> str:
    regex = func_regex(pattern)
    out, last = [], 0
    for m in _all_matches(regex, s):
        out.append(s[last:m.start()])
        out.append(repl if literal else _go_expand(repl, m))
        last = m.end()
    out.append(s[last:])
    return "".join(out)


def _count(pattern: str, s: str) -> int:
    return sum(1 for _ in _all_matches(func_regex(pattern), s))


# --------------------------------------------------------------------------- math

def _dec(v) -> Decimal:
    return Decimal(repr(_to_float64(v)))


def _decimal_op(first, rest, op) -> float:
    ctx = getcontext()
    ctx.prec = 34
    try:
        acc = _dec(first)
        for v in rest:
            acc = op(acc, _dec(v))
    except (DivisionByZero, InvalidOperation):
        raise FuncError("decimal division by 0") from None
    return float(acc)


def _div(a, b) -> int:
    x, y = _to_int64(a), _to_int64(b)
    if y == 0:
        raise FuncError("runtime error: integer divide by zero")
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def _mod(a, b) -> int:
    x, y = _to_int64(a), _to_int64(b)
    if y == 0:
        raise FuncError("runtime error: integer divide by zero")
    return int(math.fmod(x, y)) if abs(x) < 2 ** 52 else x - y * _div(x, y)


def _round(a, p: int, *round_on) -> float:
    on = _to_float64(round_on[0]) if round_on else 0.5
    val = _to_float64(a)
    pow10 = math.pow(10, _to_float64(p))
    digit = pow10 * val
    frac = math.modf(digit)[0]
    r = math.ceil(digit) if frac >= on else math.floor(digit)
    return r / pow10


def _max_f(a, *rest) -> float:
    acc = _to_float64(a)
    for v in rest:
        f = _to_float64(v)
        acc = f if (math.isnan(f) or f > acc) and not math.isnan(acc) else acc
    return acc


def _min_f(a, *rest) -> float:
    acc = _to_float64(a)
    for v in rest:
        f = _to_float64(v)
        acc = f if (math.isnan(f) or f < acc) and not math.isnan(acc) else acc
    return acc


# --------------------------------------------------------------------------- json, time, units

def _from_json(s: str):
    try:
        return json.loads(s, parse_int=float)  # Go decodes every JSON number as float64
    except (ValueError, RecursionError):
        return None


def _date(layout: str, t) -> str:
    if isinstance(t, GoTime):
        return t.format(layout)
    if isinstance(t, int) and not isinstance(t, bool):
        return GoTime(t * 1_000_000_000).format(layout)
    return _now().format(layout)


def _now() -> GoTime:
    return GoTime(time.time_ns(), UTC)


def _to_date(layout: str, s: str) -> GoTime:
    try:
        return parse_layout(layout, s, UTC)
    except ValueError:
        return GoTime.zero()


def _to_date_in_zone(layout: str, zone: str, s: str) -> GoTime:
    tz = load_zone(zone) or UTC
    try:
        return parse_layout(layout, s, tz)
    except ValueError:
        return GoTime.zero()


def _unix_to_time(epoch: str) -> GoTime:
    try:
        if not epoch or not all(c.isdigit() for c in epoch.lstrip("+-")) or epoch.lstrip("+-") == "":
            raise ValueError
        i = int(epoch, 10)
    except ValueError:
        raise FuncError(f"unable to parse time '{epoch}': strconv.ParseInt: parsing {go_quote(epoch)}: "
                        "invalid syntax") from None
    scale = {5: 86400 * 10 ** 9, 10: 10 ** 9, 13: 10 ** 6, 16: 10 ** 3, 19: 1}.get(len(epoch))
    if scale is None:
        raise FuncError(f"unable to parse time '{epoch}': unknown format")
    return GoTime(i * scale, UTC)


def _bytes(s: str) -> float:
    try:
        return float(parse_bytes(s))
    except ValueError as exc:
        raise FuncError(str(exc)) from None


def _duration(s: str) -> float:
    try:
        return parse_go_duration(s) / 1e9
    except ValueError as exc:
        raise FuncError(str(exc)) from None


def _go_replace(s: str, old: str, new: str, n: int) -> str:
    return s.replace(old, new) if n < 0 else s.replace(old, new, n)


# --------------------------------------------------------------------------- registry

def _lazy(*_args):  # and/or/__line__/__timestamp__ are evaluated by the executor itself
    raise FuncError("internal: lazy builtin called directly")


S, I, F, A, T = "str", "int", "float", "any", "time"

FUNCS: dict[str, Func] = {
    # Go built-ins (and/or/len/index/print* /comparisons live in template_exec)
    "and": Func(_lazy, (A,), A), "or": Func(_lazy, (A,), A), "not": Func(lambda v: not truth(v), (A,)),
    "len": Func(_lazy, (A,)), "index": Func(_lazy, (A,), A), "slice": Func(_lazy, (A,), A),
    "print": Func(_lazy, (), A), "printf": Func(_lazy, (S,), A), "println": Func(_lazy, (), A),
    "eq": Func(_lazy, (A,), A), "ne": Func(_lazy, (A, A)), "lt": Func(_lazy, (A, A)),
    "le": Func(_lazy, (A, A)), "gt": Func(_lazy, (A, A)), "ge": Func(_lazy, (A, A)),
    "html": Func(_lazy, (), A), "js": Func(_lazy, (), A), "urlquery": Func(_lazy, (), A),
    "call": Func(_lazy, (A,), A),
    # Loki
    "__line__": Func(_lazy), "__timestamp__": Func(_lazy),
    "lower": Func(str.lower, (S,)), "upper": Func(str.upper, (S,)), "title": Func(go_title, (S,)),
    "trunc": Func(_trunc, (I, S)), "substr": Func(_substr, (I, I, S)),
    "contains": Func(lambda sub, s: sub in s, (S, S)),
    "hasPrefix": Func(lambda p, s: s.startswith(p), (S, S)),
    "hasSuffix": Func(lambda p, s: s.endswith(p), (S, S)),
    "replace": Func(lambda old, new, s: s.replace(old, new), (S, S, S)),
    "repeat": Func(_repeat, (I, S)),
    "trim": Func(lambda s: s.strip(" \t\n\r\v\f\u0085\u00a0"), (S,)),
    "trimAll": Func(lambda cut, s: _go_trim(s, cut), (S, S)),
    "trimPrefix": Func(lambda p, s: s[len(p):] if p and s.startswith(p) else s, (S, S)),
    "trimSuffix": Func(lambda p, s: s[:-len(p)] if p and s.endswith(p) else s, (S, S)),
    "indent": Func(_indent, (I, S)), "nindent": Func(lambda n, s: "\n" + _indent(n, s), (I, S)),
    "alignLeft": Func(_align_left, (I, S)), "alignRight": Func(_align_right, (I, S)),
    "b64enc": Func(lambda s: base64.b64encode(s.encode("utf-8")).decode("ascii"), (S,)),
    "b64dec": Func(_b64dec, (S,)),
    "urlencode": Func(lambda s: quote_plus(s, safe=""), (S,)), "urldecode": Func(_urldecode, (S,)),
    "regexReplaceAll": Func(lambda r, s, repl: regex_replace_all(r, s, repl, False), (S, S, S)),
    "regexReplaceAllLiteral": Func(lambda r, s, repl: regex_replace_all(r, s, repl, True), (S, S, S)),
    "count": Func(_count, (S, S)),
    "default": Func(lambda d, *given: d if not given or _empty(given[0]) else given[0], (A,), A),
    "int": Func(_to_int64, (A,)), "float64": Func(_to_float64, (A,)),
    "add": Func(lambda *v: sum(_to_int64(x) for x in v), (), A),
    "sub": Func(lambda a, b: _to_int64(a) - _to_int64(b), (A, A)),
    "mul": Func(lambda a, *v: math.prod([_to_int64(a)] + [_to_int64(x) for x in v]), (A,), A),
    "div": Func(_div, (A, A)), "mod": Func(_mod, (A, A)),
    "addf": Func(lambda *v: _decimal_op(0.0, v, Decimal.__add__), (), A),
    "subf": Func(lambda a, *v: _decimal_op(a, v, Decimal.__sub__), (A,), A),
    "mulf": Func(lambda a, *v: _decimal_op(a, v, Decimal.__mul__), (A,), A),
    "divf": Func(lambda a, *v: _decimal_op(a, v, Decimal.__truediv__), (A,), A),
    "max": Func(lambda a, *v: max([_to_int64(a)] + [_to_int64(x) for x in v]), (A,), A),
    "min": Func(lambda a, *v: min([_to_int64(a)] + [_to_int64(x) for x in v]), (A,), A),
    "maxf": Func(_max_f, (A,), A), "minf": Func(_min_f, (A,), A),
    "ceil": Func(lambda x: float(math.ceil(_to_float64(x))) if math.isfinite(_to_float64(x)) else _to_float64(x), (A,)),
    "floor": Func(lambda x: float(math.floor(_to_float64(x))) if math.isfinite(_to_float64(x)) else _to_float64(x), (A,)),
    "round": Func(_round, (A, I), F),
    "fromJson": Func(_from_json, (S,)),
    "now": Func(_now), "date": Func(_date, (S, A)),
    "toDate": Func(_to_date, (S, S)), "toDateInZone": Func(_to_date_in_zone, (S, S, S)),
    "unixEpoch": Func(lambda t: str(t.unix()), (T,)),
    "unixEpochMillis": Func(lambda t: str(t.ns // 1_000_000), (T,)),
    "unixEpochNanos": Func(lambda t: str(t.ns), (T,)),
    "unixToTime": Func(_unix_to_time, (S,)),
    "bytes": Func(_bytes, (S,)), "duration": Func(_duration, (S,)), "duration_seconds": Func(_duration, (S,)),
    # deprecated Go `strings` equivalents (Go argument order)
    "ToLower": Func(str.lower, (S,)), "ToUpper": Func(str.upper, (S,)),
    "Replace": Func(_go_replace, (S, S, S, I)),
    "Trim": Func(lambda s, cut: _go_trim(s, cut), (S, S)),
    "TrimLeft": Func(lambda s, cut: s.lstrip(cut) if cut else s, (S, S)),
    "TrimRight": Func(lambda s, cut: s.rstrip(cut) if cut else s, (S, S)),
    "TrimPrefix": Func(lambda s, p: s[len(p):] if p and s.startswith(p) else s, (S, S)),
    "TrimSuffix": Func(lambda s, p: s[:-len(p)] if p and s.endswith(p) else s, (S, S)),
    "TrimSpace": Func(lambda s: s.strip(" \t\n\r\v\f\u0085\u00a0"), (S,)),
}
