"""Detected labels and fields for Grafana's Logs Drilldown (spec/http-api.md section 10), as
Loki computes them.

Labels: every stream label of the matching streams with its number of distinct values,
without labels whose values are all numbers or UUIDs (ids, useless to group by), except
Loki's static labels (cluster, namespace, instance, pod).

Fields: from the newest `line_limit` lines of a log query: structured metadata (parsers
[]), labels the query's own parsers extracted, and what parsing the line as JSON, else as
logfmt, finds (parsers ["json"] / ["logfmt"], with the JSON path). A field's type is that of
its latest value, tried as Go tries it: int, float, boolean, duration, bytes, string."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

from logql.gocompat.values import go_atoi, go_parse_float, parse_bytes, parse_go_duration
from logql.pipeline.builder import ERROR, ERROR_DETAILS, LabelsBuilder
from logql.pipeline.json_parser import JsonParser
from logql.pipeline.keys import json_segment
from logql.pipeline.parsers import LogfmtParser

STATIC_LABELS = {"cluster", "namespace", "instance", "pod"}
_SKIP = {ERROR, ERROR_DETAILS, "__preserve_error__"}
_GO_BOOL = {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}


def _go_parse_bool(value: str) -> None:
    if value not in _GO_BOOL:
        raise ValueError(value)


# Loki's order: strconv.ParseInt, ParseFloat, ParseBool, time.ParseDuration, humanize.ParseBytes
_TYPED_PARSERS = (("int", go_atoi), ("float", go_parse_float), ("boolean", _go_parse_bool),
                  ("duration", parse_go_duration), ("bytes", parse_bytes))


def _is_id(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        pass
    try:
        uuid.UUID(value)
        return True
    except ValueError:
        return False


def reject_label(values: set[str]) -> bool:
    """Loki's shouldRejectLabel: no values, or only ids (0/1 alone count as booleans)."""
    if not values:
        return True
    if len(values) <= 2 and values <= {"0", "1"}:
        return False
    return all(_is_id(v) for v in values)


def detected_labels(label_sets: Iterable[dict[str, str]]) -> list[dict[str, Any]]:
    values: dict[str, set[str]] = {}
    for labels in label_sets:
        for name, value in labels.items():
            values.setdefault(name, set()).add(value)
    return [{"label": name, "cardinality": len(vals)} for name, vals in sorted(values.items())
            if (name in STATIC_LABELS and vals) or not reject_label(vals)]


def field_type(value: str) -> str:
    for name, parse in _TYPED_PARSERS:
        try:
            parse(value)
        except ValueError:
            continue
        return name
    return "string"


@dataclass
class Field:
    parsers: list[str]
    type: str = "string"
    values: set[str] = field(default_factory=set)
    json_path: list[str] | None = None


def _json_paths(line: str) -> dict[str, list[str]]:
    """Flattened JSON key -> its path, as `| json` names nested keys (a_b for {"a":{"b"}})."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # a line too deep to decode is not JSON here
        return {}
    out: dict[str, list[str]] = {}
    # depth first, in key order (the first path to a name wins), with a stack of its own
    # rather than recursion: a line is data, as deep as the decoder took it
    stack = [(iter(obj.items()), "", [])] if isinstance(obj, dict) else []
    while stack:
        items, prefix, path = stack[-1]
        for key, value in items:
            seg = json_segment(key)
            name = prefix + "_" + seg if prefix and seg else prefix or seg
            if isinstance(value, dict):
                stack.append((iter(value.items()), name, path + [key]))
                break
            if name:
                out.setdefault("_" + name if name[0].isdigit() else name, path + [key])
        else:
            stack.pop()
    return out


def _parse_line(stream: dict[str, str], sm: dict[str, str],
                line: str) -> tuple[dict[str, str], str | None]:
    """What `| json`, else `| logfmt`, extracts from the line, and which one did."""
    for name, parser in (("json", JsonParser()), ("logfmt", LogfmtParser())):
        labels = LabelsBuilder(stream, sm)
        parser.process(0, line, labels)
        if labels.error is None:
            return labels.parsed_labels(), name
    return {}, None


def detected_fields(entries: Iterable[tuple[dict[str, str], str, dict, dict]],
                    limit: int) -> dict[str, Field]:
    """`entries`: (stream labels, line, structured metadata, parsed labels) newest first."""
    fields: dict[str, Field] = {}

    def add(name: str, value: str, parsers: list[str]) -> Field | None:
        f = fields.get(name)
        if f is None:
            if len(fields) >= limit:
                return None
            f = fields[name] = Field(list(parsers))
        for p in parsers:
            if p not in f.parsers:
                f.parsers.append(p)
        f.type = field_type(value)
        f.values.add(value)
        return f

    for stream, line, sm, parsed in entries:
        for name, value in sm.items():
            add(name, value, [])
        found, parser = _parse_line(stream, sm, line)
        merged = {k: v for k, v in parsed.items() if k not in _SKIP}
        for k, v in found.items():
            if k not in _SKIP:
                merged.setdefault(k, v)
        parsers = [parser] if parser else []
        paths = _json_paths(line) if parser == "json" else {}
        for name, value in merged.items():
            f = add(name, value, parsers)
            if f is not None and name in paths:
                f.json_path = paths[name]
    return fields


def fields_json(fields: dict[str, Field]) -> list[dict[str, Any]]:
    out = []
    for name, f in sorted(fields.items()):
        item: dict[str, Any] = {"label": name, "type": f.type, "cardinality": len(f.values),
                                "parsers": f.parsers}
        if f.json_path is not None:
            item["jsonPath"] = f.json_path
        out.append(item)
    return out


def field_values(entries: Iterable[tuple[dict[str, str], str, dict, dict]], name: str,
                 limit: int) -> list[str]:
    values: list[str] = []
    seen: set[str] = set()
    for stream, line, sm, parsed in entries:
        if len(values) >= limit:
            break
        candidates = []
        if name in sm:
            candidates.append(sm[name])
        found, _ = _parse_line(stream, sm, line)
        if name in parsed:
            candidates.append(parsed[name])
        elif name in found:
            candidates.append(found[name])
        for v in candidates:
            if v not in seen:
                seen.add(v)
                values.append(v)
    return sorted(values)
