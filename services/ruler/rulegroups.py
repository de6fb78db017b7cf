"""Rule groups: the YAML the rules API takes and shows (spec/http-api.md section 13.1),
validated with Loki's error texts (13.2), and printed as Loki prints them (Go's yaml.v3:
four-space indentation, sequences indented, quoting only where needed)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from logql import ParseError, depth, parse_expr
from logql.gocompat.format import prom_duration_str
from logql.gocompat.values import GoParseError, parse_prom_duration
from logql.syntax import ast as A
from logql.template.errors import TemplateError
from services.runtime.errors import PlainError
from services.ruler.prom_templates import parse_alert_template

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass
class Rule:
    expr: str
    record: str = ""
    alert: str = ""
    for_ns: int = 0
    keep_firing_for_ns: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.alert or self.record


@dataclass
class RuleGroup:
    name: str
    rules: list[Rule]
    interval_ns: int = 0     # 0: ruler.evaluation_interval
    limit: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The group as Loki's YAML shows it (keys in its order, empty ones left out)."""
        out: dict[str, Any] = {"name": self.name}
        if self.interval_ns:
            out["interval"] = prom_duration_str(self.interval_ns)
        if self.limit:
            out["limit"] = self.limit
        out["rules"] = []
        for r in self.rules:
            d: dict[str, Any] = {"record": r.record} if r.record else {"alert": r.alert}
            d["expr"] = r.expr
            if r.for_ns:
                d["for"] = prom_duration_str(r.for_ns)
            if r.keep_firing_for_ns:
                d["keep_firing_for"] = prom_duration_str(r.keep_firing_for_ns)
            if r.labels:
                d["labels"] = dict(sorted(r.labels.items()))
            if r.annotations:
                d["annotations"] = dict(sorted(r.annotations.items()))
            out["rules"].append(d)
        return out


def bad_request(message: str) -> PlainError:
    return PlainError(400, message, newline=True)


class _Undecodable(Exception):
    pass


def _duration(value: Any) -> int:
    """A Prometheus duration (model.Duration) in ns; anything else cannot be decoded."""
    if value is None or value == "":
        return 0
    if not isinstance(value, str):
        raise _Undecodable()
    try:
        return parse_prom_duration(value)
    except GoParseError:
        raise _Undecodable() from None


def _string_map(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Undecodable()
    out = {}
    for k, v in value.items():
        if isinstance(v, (dict, list)):
            raise _Undecodable()
        out[str(k)] = "" if v is None else _scalar_text(v)
    return out


def _scalar_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return str(int(v))
    return str(v)


def decode_group(body: bytes) -> RuleGroup:
    """One group from a POST body; 400 `unable to decoded rule group` (sic, Loki's text)
    for anything YAML cannot turn into a group, bad durations included."""
    try:
        data = depth.load_yaml(body.decode("utf-8")) if body.strip() else {}
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise _Undecodable()
        raw_rules = data.get("rules") or []
        if not isinstance(raw_rules, list):
            raise _Undecodable()
        rules = []
        for r in raw_rules:
            if not isinstance(r, dict):
                raise _Undecodable()
            rules.append(Rule(
                expr=_text(r.get("expr")), record=_text(r.get("record")),
                alert=_text(r.get("alert")), for_ns=_duration(r.get("for")),
                keep_firing_for_ns=_duration(r.get("keep_firing_for")),
                labels=_string_map(r.get("labels")),
                annotations=_string_map(r.get("annotations"))))
        limit = data.get("limit") or 0
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise _Undecodable()
        return RuleGroup(name=_text(data.get("name")), rules=rules,
                         interval_ns=_duration(data.get("interval")), limit=limit)
    except (_Undecodable, yaml.YAMLError, UnicodeDecodeError):
        raise bad_request("unable to decoded rule group") from None
    except depth.TooDeep as exc:  # Loki's text, and which bound the document passed
        raise bad_request(f"unable to decoded rule group: {exc}") from None


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        raise _Undecodable()
    return _scalar_text(v)


def validate_group(group: RuleGroup) -> None:
    """Loki's checks, every failure named, joined by ", " in one 400."""
    errors = []
    if not group.name:
        errors.append("group 0: Groupname must not be empty")
    for rule in group.rules:
        message = _rule_error(rule, group.name)
        if message:
            errors.append(message)
    if errors:
        raise bad_request(", ".join(errors))


def _rule_error(r: Rule, group: str) -> str | None:
    if r.record and r.alert:
        return "only one of 'record' and 'alert' must be set"
    if not r.record and not r.alert:
        return "one of 'record' or 'alert' must be set"
    if not r.expr:
        return "field 'expr' must be set in rule"
    kind = f"record '{r.record}'" if r.record else f"alert '{r.alert}'"
    try:
        expr = parse_expr(r.expr)
    except ParseError as exc:
        return f"could not parse expression for {kind} in group '{group}': {exc}"
    if isinstance(expr, A.LogQuery):
        # Loki takes it and fails every evaluation ("rule result is not a vector or
        # scalar"); refused here, where the author sees it
        return (f"invalid expression for {kind} in group '{group}': rules need a metric "
                f"query, not a log query")
    if r.record:
        if r.annotations:
            return "invalid field 'annotations' in recording rule"
        if r.for_ns:
            return "invalid field 'for' in recording rule"
        if not _METRIC_NAME.match(r.record):
            return f"invalid recording rule name: {r.record}"
    for k, v in r.labels.items():
        if not _LABEL_NAME.match(k) or k == "__name__":
            return f"invalid label name: {k}"
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return f"invalid label value: {v}"
    for k in r.annotations:
        if not _LABEL_NAME.match(k):
            return f"invalid annotation name: {k}"
    if r.alert:
        for what, items in (("label", r.labels), ("annotation", r.annotations)):
            for k, v in items.items():
                try:
                    parse_alert_template(v, r.alert)
                except TemplateError as exc:
                    return f'{what} "{k}": {exc}'
    return None


# -- printing, as Go's yaml.v3 does -------------------------------------------------------------

_PLAIN_BAD_START = set("-?:,[]{}#&*!|>'\"%@`")
_RESOLVES = re.compile(r"^(~|null|Null|NULL|true|True|TRUE|false|False|FALSE|y|Y|yes|Yes|YES|"
                       r"n|N|no|No|NO|on|On|ON|off|Off|OFF|"
                       r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|"
                       r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)|0x[0-9a-fA-F]+|0o[0-7]+|"
                       r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?)$")


def _scalar(s: Any) -> str:
    if isinstance(s, bool):
        return "true" if s else "false"
    if isinstance(s, int):
        return str(s)
    s = str(s)
    if "\n" in s:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if s == "" or _RESOLVES.match(s):
        return '"' + s + '"'
    plain = not (s[0] in _PLAIN_BAD_START or s[0] == " " or s[-1] == " " or ": " in s
                 or " #" in s or s.endswith(":") or "\t" in s)
    if plain:
        return s
    if s.isprintable():
        return "'" + s.replace("'", "''") + "'"
    return '"' + s.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'


def _emit(value: Any, indent: int, in_item: bool, out: list[str], first_prefix: str) -> None:
    """yaml.v3's block style: a mapping inside a sequence item starts after "- " (+2),
    every other nesting rounds the indentation up to the next multiple of four."""
    if isinstance(value, dict):
        pad = " " * indent
        for i, (k, v) in enumerate(value.items()):
            head = (first_prefix if i == 0 else pad) + f"{_scalar(k)}:"
            if isinstance(v, (dict, list)) and v:
                out.append(head)
                child = 4 * ((indent + 4) // 4)
                _emit(v, child, False, out, " " * child)
            elif isinstance(v, dict):
                out.append(head + " {}")
            elif isinstance(v, list):
                out.append(head + " []")
            else:
                out.append(f"{head} {_scalar(v)}")
    elif isinstance(value, list):
        pad = " " * indent
        for item in value:
            if isinstance(item, dict) and item:
                _emit(item, indent + 2, True, out, pad + "- ")
            else:
                out.append(f"{pad}- {_scalar(item)}")


def to_yaml(data: dict) -> str:
    if not data:
        return "{}\n"
    out: list[str] = []
    _emit(data, 0, False, out, "")
    return "\n".join(out) + "\n"
