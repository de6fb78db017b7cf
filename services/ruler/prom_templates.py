"""Alert label and annotation templates, as Prometheus expands them: Go text/template (the
engine line_format uses) with `$labels`, `$value`, `$externalLabels`, `$externalURL`, and
Prometheus' template functions instead of sprig's."""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import urlparse

from logql.gocompat.values import GoParseError, parse_prom_duration
from logql.template.errors import TemplateError, TemplateExecError
from logql.template.funcs import (FUNCS, A, S, Func, FuncError, func_regex, regex_replace_all,
                                  go_title)
from logql.template.gotime import GoTime
from logql.template.parse import Template

__all__ = ["parse_alert_template", "expand_alert_template", "TemplateError"]

_DEFS = ("{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}"
         "{{$externalURL := .ExternalURL}}{{$value := .Value}}")
_GO_BUILTINS = ("and", "or", "not", "len", "index", "slice", "print", "printf", "println",
                "eq", "ne", "lt", "le", "gt", "ge", "html", "js", "urlquery", "call")


class ZeroMap(dict):
    """A label map read with Go's missingkey=zero: an absent label is ""."""

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, key, "")


def _float(v: Any) -> float:
    if isinstance(v, bool):
        raise FuncError(f"can't convert {v} to float")
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            raise FuncError(f'strconv.ParseFloat: parsing "{v}": invalid syntax') from None
    raise FuncError(f"can't convert {v!r} to float")


def _g4(v: float) -> str:
    """Go's %.4g."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return f"{v:.4g}"


def humanize(v: Any) -> str:
    v = _float(v)
    if v == 0 or math.isnan(v) or math.isinf(v):
        return _g4(v)
    prefix = ""
    if abs(v) >= 1:
        for p in ("k", "M", "G", "T", "P", "E", "Z", "Y"):
            if abs(v) < 1000:
                break
            prefix, v = p, v / 1000
        return _g4(v) + prefix
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return _g4(v) + prefix


def humanize1024(v: Any) -> str:
    v = _float(v)
    if abs(v) <= 1 or math.isnan(v) or math.isinf(v):
        return _g4(v)
    prefix = ""
    for p in ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"):
        if abs(v) < 1024:
            break
        prefix, v = p, v / 1024
    return _g4(v) + prefix


def humanize_duration(v: Any) -> str:
    v = _float(v)
    if math.isnan(v) or math.isinf(v):
        return _g4(v)
    if v == 0:
        return _g4(v) + "s"
    if abs(v) >= 1:
        sign = "-" if v < 0 else ""
        v = abs(v)
        whole = int(v)
        seconds, minutes = whole % 60, (whole // 60) % 60
        hours, days = (whole // 3600) % 24, whole // 86400
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{_g4(v)}s"
    prefix = ""
    for p in ("m", "u", "n", "p", "f", "a", "z", "y"):
        if abs(v) >= 1:
            break
        prefix, v = p, v * 1000
    return f"{_g4(v)}{prefix}s"


def _to_time(v: Any) -> GoTime:
    f = _float(v)
    if math.isnan(f) or math.isinf(f):
        raise FuncError(f"cannot convert {f} to Time")
    return GoTime(int(round(f * 1e9)))


def _parse_duration(s: str) -> float:
    try:
        return parse_prom_duration(s) / 1e9
    except GoParseError as exc:
        raise FuncError(str(exc)) from None


def _match(pattern: str, s: str) -> bool:
    return func_regex(pattern).search(s) is not None


def _strip_port(host: str) -> str:
    if host.startswith("[") and "]" in host:
        return host[1:host.index("]")]
    if host.count(":") == 1:
        return host.split(":")[0]
    return host


def _strip_domain(host: str) -> str:
    port = ""
    if host.count(":") == 1 and not host.startswith("["):
        host, port = host.split(":")
        port = ":" + port
    if re.match(r"^[0-9.]+$", host) or ":" in host:
        return host + port
    return host.split(".")[0] + port


def _unsupported(name: str):
    def fn(*_args):
        raise FuncError(f"{name} is not available in logstore's ruler (no PromQL here)")
    return fn


PROM_FUNCS: dict[str, Func] = {name: FUNCS[name] for name in _GO_BUILTINS}
PROM_FUNCS.update({
    "humanize": Func(humanize, (A,)),
    "humanize1024": Func(humanize1024, (A,)),
    "humanizeDuration": Func(humanize_duration, (A,)),
    "humanizePercentage": Func(lambda v: _g4(_float(v) * 100) + "%", (A,)),
    "humanizeTimestamp": Func(lambda v: str(_to_time(v)), (A,)),
    "toTime": Func(_to_time, (A,)),
    "toDuration": Func(lambda v: humanize_duration(v), (A,)),
    "parseDuration": Func(_parse_duration, (S,)),
    "title": Func(go_title, (S,)),
    "toUpper": Func(str.upper, (S,)),
    "toLower": Func(str.lower, (S,)),
    "match": Func(_match, (S, S)),
    "reReplaceAll": Func(lambda r, repl, text: regex_replace_all(r, text, repl, False),
                         (S, S, S)),
    "safeHtml": Func(lambda s: s, (S,)),
    "stripPort": Func(_strip_port, (S,)),
    "stripDomain": Func(_strip_domain, (S,)),
    "args": Func(lambda *a: {f"arg{i}": v for i, v in enumerate(a)}, (), A),
    "pathPrefix": Func(lambda: "", ()),
    "externalURL": Func(lambda: "", ()),
    "query": Func(_unsupported("query"), (S,)),
    "first": Func(_unsupported("first"), (A,)),
    "label": Func(_unsupported("label"), (S, A)),
    "value": Func(_unsupported("value"), (A,)),
    "strvalue": Func(_unsupported("strvalue"), (A,)),
    "sortByLabel": Func(_unsupported("sortByLabel"), (S, A)),
    "graphLink": Func(_unsupported("graphLink"), (S,)),
    "tableLink": Func(_unsupported("tableLink"), (S,)),
})


def parse_alert_template(text: str, alert: str, external_url: str = "") -> Template:
    """The template of one label or annotation of alert `alert`; TemplateError if it does not
    parse (`template: __alert_<alert>:<line>: ...`, as Prometheus says)."""
    funcs = dict(PROM_FUNCS)
    funcs["externalURL"] = Func(lambda: external_url, ())
    funcs["pathPrefix"] = Func(lambda: urlparse(external_url).path.rstrip("/"), ())
    return Template(_DEFS + text, "__alert_" + alert, funcs)


def expand_alert_template(template: Template, labels: dict[str, str], value: float,
                          external_labels: dict[str, str], external_url: str) -> str:
    """The expansion, or `<error expanding template: ...>` as Prometheus shows a failure."""
    data = {"Labels": ZeroMap(labels), "ExternalLabels": ZeroMap(external_labels),
            "ExternalURL": external_url, "Value": value}
    try:
        return template.execute(data)
    except TemplateExecError as exc:
        return f"<error expanding template: {exc}>"
