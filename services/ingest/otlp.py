"""OTLP logs to push streams (http-api.md §3.2-§3.5), as Loki's OTLP endpoint maps them.

Resource attributes on the index list become stream labels, every other attribute becomes
structured metadata; names are sanitised as structured-metadata names are (`k8s.pod.name`
-> `k8s_pod_name`); values become strings. The result is a list of `RawStream`s that go
through the same validation, discovery and group commit as any other push.
"""

from __future__ import annotations

import base64
import re
import time
from typing import Any, Iterable

import msgspec
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from config import OtlpAttributeRule, OtlpConfig
from logql import depth
from logql.gocompat.format import format_float_f
from logql.model import TS_MAX
from services.ingest.decode import JSON_MEDIA
from services.ingest.prepare import RawStream, normalise_metadata_name
from services.runtime.limits import Limits

# Loki's default resource attributes that become index labels (§3.3)
DEFAULT_INDEX_ATTRIBUTES = frozenset((
    "service.name", "service.namespace", "service.instance.id",
    "deployment.environment", "deployment.environment.name",
    "cloud.region", "cloud.availability_zone",
    "k8s.cluster.name", "k8s.namespace.name", "k8s.pod.name", "k8s.container.name",
    "container.name", "k8s.replicaset.name", "k8s.deployment.name", "k8s.statefulset.name",
    "k8s.daemonset.name", "k8s.cronjob.name", "k8s.job.name",
))
INDEX, METADATA = "index_label", "structured_metadata"  # any other action drops
PROTOBUF, JSON = "application/x-protobuf", JSON_MEDIA
_json = msgspec.json.Encoder(order="sorted")


class OtlpError(ValueError):
    """The request cannot be read (400)."""


# -- values --------------------------------------------------------------------------------

def _raw(value: Any) -> Any:
    """An AnyValue as the plain value Go's pcommon `AsRaw` gives (for JSON rendering)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind == "array_value":
        return [_raw(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _raw(kv.value) for kv in value.kvlist_value.values}
    return None


def render(value: Any) -> str:
    """An AnyValue as Loki renders it: strings as they are, numbers in Go's shortest form,
    bytes as base64, arrays and maps as JSON text, nothing as ""."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return str(value.int_value)
    if kind == "double_value":
        return format_float_f(value.double_value)
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if kind is None:
        return ""
    return _json.encode(_raw(value)).decode()


def flatten(attributes: Iterable[Any], prefix: str = "") -> Iterable[tuple[str, str, str]]:
    """(original top-level key, sanitised name, string value); maps are flattened into
    `<parent>_<child>` names."""
    for kv in attributes:
        name = normalise_metadata_name(prefix + kv.key)
        if kv.value.WhichOneof("value") == "kvlist_value":
            for _, child, text in flatten(kv.value.kvlist_value.values, name + "_"):
                yield kv.key, child, text
        else:
            yield kv.key, name, render(kv.value)


# -- rules ---------------------------------------------------------------------------------

class _Rules:
    """First matching rule wins; unmatched attributes get the default action."""

    def __init__(self, rules: list[OtlpAttributeRule], default: str,
                 index_defaults: frozenset[str] = frozenset()):
        self.rules = [(r.action, frozenset(r.attributes), re.compile(r.regex) if r.regex
                       else None) for r in rules]
        self.default = default
        self.index_defaults = index_defaults
        self._cache: dict[str, str] = {}

    def action(self, key: str) -> str:
        found = self._cache.get(key)
        if found is None:
            found = self.default
            for action, names, regex in self.rules:
                if key in names or (regex is not None and regex.fullmatch(key)):
                    found = action
                    break
            else:
                if key in self.index_defaults:
                    found = INDEX
            if len(self._cache) < 10_000:
                self._cache[key] = found
        return found


class OtlpMapper:
    """Turns one decoded ExportLogsServiceRequest into push streams, per the tenant's
    `limits_config.otlp_config`."""

    def __init__(self, cfg: OtlpConfig):
        self.config = cfg  # what a query worker builds its own mapper from
        res = cfg.resource_attributes
        self.resource = _Rules(res.attributes_config, METADATA,
                               frozenset() if res.ignore_defaults else DEFAULT_INDEX_ATTRIBUTES)
        self.scope = _Rules(cfg.scope_attributes, METADATA)
        self.record = _Rules(cfg.log_attributes, METADATA)
        self.severity_text_as_label = cfg.severity_text_as_label

    def streams(self, request: Any, now_ns: int | None = None) -> list[RawStream]:
        now_ns = now_ns or time.time_ns()
        by_labels: dict[tuple, RawStream] = {}
        for resource_logs in request.resource_logs:
            index: dict[str, str] = {}
            resource_md: list[tuple[str, str]] = []
            for key, name, text in flatten(resource_logs.resource.attributes):
                action = self.resource.action(key)
                if action == INDEX:
                    index[name] = text
                elif action == METADATA:
                    resource_md.append((name, text))
            for scope_logs in resource_logs.scope_logs:
                scope_md = self._scope_metadata(scope_logs.scope)
                for record in scope_logs.log_records:
                    labels, entry = self._entry(record, index, resource_md, scope_md, now_ns)
                    key = tuple(sorted(labels.items()))
                    stream = by_labels.get(key)
                    if stream is None:
                        stream = by_labels[key] = RawStream(list(labels.items()), [])
                    stream.entries.append(entry)
        return list(by_labels.values())

    def _scope_metadata(self, scope: Any) -> list[tuple[str, str]]:
        md = [(name, text) for key, name, text in flatten(scope.attributes)
              if self.scope.action(key) == METADATA]
        if scope.name:
            md.append(("scope_name", scope.name))
        if scope.version:
            md.append(("scope_version", scope.version))
        if scope.dropped_attributes_count:
            md.append(("scope_dropped_attributes_count", str(scope.dropped_attributes_count)))
        return md

    def _entry(self, record: Any, index: dict[str, str], resource_md: list, scope_md: list,
               now_ns: int) -> tuple[dict[str, str], tuple[int, str, dict[str, str]]]:
        labels = index
        md: dict[str, str] = {}
        for key, name, text in flatten(record.attributes):
            if key == "event_name" and record.event_name:
                continue
            action = self.record.action(key)
            if action == INDEX:
                if labels is index:
                    labels = dict(index)
                labels[name] = text
            elif action == METADATA:
                md.setdefault(name, text)
        if record.time_unix_nano and record.observed_time_unix_nano:
            md.setdefault("observed_timestamp", str(record.observed_time_unix_nano))
        if record.severity_number:
            md.setdefault("severity_number", str(record.severity_number))
        if record.severity_text:
            md.setdefault("severity_text", record.severity_text)
            if self.severity_text_as_label:
                if labels is index:
                    labels = dict(index)
                labels["severity_text"] = record.severity_text
        if record.dropped_attributes_count:
            md.setdefault("dropped_attributes_count", str(record.dropped_attributes_count))
        if record.flags:
            md.setdefault("flags", str(record.flags))
        if record.trace_id:
            md.setdefault("trace_id", record.trace_id.hex())
        if record.span_id:
            md.setdefault("span_id", record.span_id.hex())
        if record.event_name:
            md.setdefault("event_name", record.event_name)
        for name, text in resource_md:
            md.setdefault(name, text)
        for name, text in scope_md:
            md.setdefault(name, text)
        ts = record.time_unix_nano or record.observed_time_unix_nano or now_ns
        if ts > TS_MAX:
            raise OtlpError(f"invalid timestamp {ts}: value out of range (1677-09-23 to "
                            "2262-04-10 in nanoseconds)")
        return labels, (ts, render(record.body), md or None)


# -- OTLP/JSON -----------------------------------------------------------------------------

_ID_FIELDS = ("traceId", "spanId", "trace_id", "span_id")


def hex_ids_to_base64(document: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping reads bytes as
    base64. Converted in place, then parsed with the standard mapping."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key in _ID_FIELDS and isinstance(value, str):
                try:
                    document[key] = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    raise OtlpError(f"invalid {key} {value!r}: not hex") from None
            else:
                hex_ids_to_base64(value)
    elif isinstance(document, list):
        for item in document:
            hex_ids_to_base64(item)
    return document


def decode_otlp(body: bytes, media: str) -> Any:
    """An ExportLogsServiceRequest from its protobuf or OTLP/JSON body."""
    if media == PROTOBUF:
        try:
            return ExportLogsServiceRequest.FromString(body)
        except DecodeError as exc:
            raise OtlpError(f"failed to unmarshal request: {exc}") from None
    try:
        # measured before decoding: msgspec, hex_ids_to_base64 and ParseDict all recurse
        depth.check_json(body)
        document = hex_ids_to_base64(msgspec.json.decode(body)) if body.strip() else {}
        return json_format.ParseDict(document, ExportLogsServiceRequest(),
                                     ignore_unknown_fields=True)
    except (msgspec.DecodeError, json_format.ParseError, depth.TooDeep) as exc:
        raise OtlpError(f"failed to unmarshal request: {exc}") from None


class TenantMappers:
    """The pushing tenant's OtlpMapper. Tenants with the same `otlp_config` share one; a
    runtime overrides reload gives a tenant a new config, and what no tenant uses any more
    is let go then."""

    def __init__(self, limits: Limits):
        self.limits = limits
        # by id of the config: the entry holds the config, so its id cannot be reused
        self._mappers: dict[int, tuple[OtlpConfig, OtlpMapper]] = {}

    def of(self, tenant: str) -> OtlpMapper:
        cfg = self.limits.of(tenant).otlp_config
        hit = self._mappers.get(id(cfg))
        if hit is None:
            live = {id(lc.otlp_config) for lc in self.limits.in_force()}
            self._mappers = {k: v for k, v in self._mappers.items() if k in live}
            hit = self._mappers[id(cfg)] = (cfg, OtlpMapper(cfg))
        return hit[1]
