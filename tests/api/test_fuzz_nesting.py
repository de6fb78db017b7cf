"""Hypothesis strategies for every input grammar a client sends (issue 28), generating deep
nesting and huge fan-out and driven through the HTTP layer of one real server with
`auth_enabled: true`: push JSON and protobuf, OTLP JSON and protobuf, LogQL, Go templates in
line_format and label_format, rule YAML, dashboard JSON. No answer may be a 5xx; a log line,
however deep, is stored, and reads of it answer 200."""

from __future__ import annotations

import json
import time

import httpx
import pytest
import snappy
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from logql.depth import MAX_DEPTH, MAX_TEMPLATE_DEPTH

TENANT = {"X-Scope-OrgID": "fuzz"}
ADMIN = ("admin", "fuzz-nesting-pass")
NS = 10**9
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

# depths around every bound, past the interpreter's guard, and far past it
# (the deep ones first: Hypothesis favours a one_of's first branch)
depths = st.one_of(st.sampled_from(sorted({
    MAX_DEPTH - 2, MAX_DEPTH, MAX_DEPTH + 1, MAX_TEMPLATE_DEPTH, MAX_TEMPLATE_DEPTH + 1,
    99, 101, 333, 900, 1000, 3000, 40_000})), st.integers(0, 40))
fan_outs = st.sampled_from([0, 1, 10, 1000, 50_000])


def _json_nest(kind: str, n: int, leaf: str = "1") -> str:
    """JSON text nested n deep: arrays, objects, both alternating, or opened and never
    closed (a decoder must not recurse into what it cannot finish)."""
    if kind == "array":
        return "[" * n + leaf + "]" * n
    if kind == "object":
        return '{"a":' * n + leaf + "}" * n
    if kind == "mixed":
        return '[{"a":' * (n // 2) + leaf + "}]" * (n // 2)
    return "[" * n


def _json_wide(kind: str, k: int) -> str:
    if kind == "object":
        return "{" + ",".join(f'"k{i}":{i}' for i in range(k)) + "}"
    return "[" + ",".join(["[]"] * k) + "]"


json_values = st.one_of(
    st.builds(_json_nest, st.sampled_from(["array", "object", "mixed", "unclosed"]), depths),
    st.builds(_json_wide, st.sampled_from(["array", "object"]), fan_outs))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.conftest import LogstoreServer
    srv = LogstoreServer(tmp_path_factory.mktemp("fuzz-nesting") / "data", {
        "auth_enabled": True,
        "grafana": {"admin_password": ADMIN[1], "disable_brute_force_login_protection": True},
        "limits_config": {"reject_old_samples": False, "max_line_size": 0},
        "pattern_ingester": {"enabled": True}}).start()
    with httpx.Client(base_url=srv.url, headers=TENANT, timeout=60) as client:
        yield client
    srv.stop()


def _no_server_error(r: httpx.Response, what: str) -> None:
    assert r.status_code < 500, (what[:200], r.status_code, r.text[:300])


# -- push: JSON -----------------------------------------------------------------------------

def _push_json(place: str, value: str) -> str:
    ts = str(time.time_ns())
    if place == "line":  # data: stored, however deep
        return json.dumps({"streams": [{"stream": {"app": "fz"}, "values": [[ts, value]]}]})
    if place == "unknown-field":
        return '{"streams":[],"x":' + value + "}"
    if place == "stream":
        return '{"streams":[{"stream":' + value + ',"values":[]}]}'
    if place == "values":
        return '{"streams":[{"stream":{"app":"fz"},"values":' + value + "}]}"
    if place == "metadata":
        return '{"streams":[{"stream":{"app":"fz"},"values":[["%s","x",%s]]}]}' % (ts, value)
    return value  # the whole body


@given(place=st.sampled_from(["line", "unknown-field", "stream", "values", "metadata", "body"]),
       value=json_values, legacy=st.booleans())
@example(place="line", value=_json_nest("object", 40_000), legacy=False)  # issue 28, row 1
@SETTINGS
def test_push_json_never_5xx_and_a_deep_line_is_stored(server, place, value, legacy):
    body = _push_json(place, value)
    path = "/api/compat/push" if legacy and place != "line" else "/loki/api/v1/push"
    r = server.post(path, content=body, headers={"Content-Type": "application/json"})
    _no_server_error(r, body)
    if place == "line":
        assert r.status_code == 204, r.text[:300]


def test_reads_of_deep_lines_answer_200(server):
    now = time.time_ns()
    lines = [_json_nest(kind, n) for kind in ("array", "object", "mixed", "unclosed")
             for n in (MAX_DEPTH + 1, 900, 40_000)]
    r = server.post("/loki/api/v1/push", headers={"Content-Type": "application/json"},
                    content=json.dumps({"streams": [{"stream": {"app": "reads"}, "values": [
                        [str(now - i), line] for i, line in enumerate(lines)]}]}))
    assert r.status_code == 204, r.text
    window = {"start": str(now - 3600 * NS), "end": str(now + NS)}
    for query in ('{app="reads"} | json', '{app="reads"} | json a="a.a"', '{app="reads"} | unpack',
                  '{app="reads"} | logfmt | json | line_format "{{.a}}"',
                  'sum(count_over_time({app="reads"} | json | drop __error__, '
                  '__error_details__ [1h]))'):
        r = server.get("/loki/api/v1/query_range", params={"query": query, **window})
        assert r.status_code == 200, (query, r.text[:300])
    for path in ("detected_fields", "detected_labels", "patterns", "detected_field/a/values"):
        r = server.get(f"/loki/api/v1/{path}", params={"query": '{app="reads"}', **window})
        assert r.status_code == 200, (path, r.text[:300])


# -- push: protobuf -------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


# each protobuf level is a length prefix around the next, built inside out: quadratic in
# the depth, so protobuf nesting stops at 3000 (upb refuses past 100 anyway)
PROTOBUF_LEVELS = 3000


def _nested_messages(number: int, n: int, inner: bytes) -> bytes:
    for _ in range(min(n, PROTOBUF_LEVELS)):
        inner = _field(number, inner)
    return inner


def _push_protobuf(kind: str, n: int) -> bytes:
    from proto import push_pb2
    if kind == "line":
        req = push_pb2.PushRequest()
        entry = req.streams.add(labels='{app="fzpb"}').entries.add(line=_json_nest("object", n))
        entry.timestamp.FromNanoseconds(time.time_ns())
        raw = req.SerializeToString()
    elif kind == "groups":  # unknown field 15 as nested start/end groups
        raw = _varint(15 << 3 | 3) * n + _varint(15 << 3 | 4) * n
    elif kind == "unknown-messages":
        raw = _nested_messages(15, n, b"")
    else:  # many streams
        raw = _field(1, _field(1, b'{a="b"}')) * n
    return snappy.compress(raw)


@given(kind=st.sampled_from(["line", "groups", "unknown-messages", "streams"]), n=depths)
@SETTINGS
def test_push_protobuf_never_5xx(server, kind, n):
    r = server.post("/loki/api/v1/push", content=_push_protobuf(kind, n),
                    headers={"Content-Type": "application/x-protobuf"})
    _no_server_error(r, f"{kind} {n}")
    if kind == "line":
        assert r.status_code == 204, r.text[:300]


# -- OTLP: JSON and protobuf ----------------------------------------------------------------

def _otlp_json(kind: str, n: int) -> str:
    n = n if kind != "unknown" else 0
    if kind == "kvlist":
        value = ('{"kvlistValue":{"values":[{"key":"k","value":' * n + '{"stringValue":"x"}'
                 + "}]}}" * n)
    else:
        value = '{"arrayValue":{"values":[' * n + '{"stringValue":"x"}' + "]}}" * n
    extra = ',"x":' + _json_nest("array", n) if kind == "unknown" else ""
    return ('{"resourceLogs":[{"resource":{"attributes":[{"key":"a","value":' + value + "}]}"
            + extra + ',"scopeLogs":[{"logRecords":[{"timeUnixNano":"%d","body":%s}]}]}]}'
            % (time.time_ns(), value))


def _otlp_protobuf(kind: str, n: int) -> bytes:
    value = _field(1, b"x")  # AnyValue{string_value}
    for _ in range(min(n, PROTOBUF_LEVELS)):
        # AnyValue{array_value(5): ArrayValue{values(1)}} or {kvlist_value(6): KeyValueList
        # {values(1): KeyValue{key(1), value(2)}}}
        value = _field(5, _field(1, value)) if kind == "array" else \
            _field(6, _field(1, _field(1, b"k") + _field(2, value)))
    attribute = _field(1, b"a") + _field(2, value)
    record = _varint(1 << 3 | 1) + time.time_ns().to_bytes(8, "little") + _field(5, value)
    resource_logs = _field(1, _field(1, attribute)) + _field(2, _field(2, record))
    return _field(1, resource_logs)


@given(kind=st.sampled_from(["kvlist", "array", "unknown"]), n=depths, as_json=st.booleans())
@example(kind="kvlist", n=3000, as_json=True)  # issue 28, row 2
@SETTINGS
def test_otlp_never_5xx(server, kind, n, as_json):
    if as_json:
        body, ctype = _otlp_json(kind, n).encode(), "application/json"
    else:
        body, ctype = _otlp_protobuf("array" if kind == "unknown" else kind, n), \
            "application/x-protobuf"
    r = server.post("/otlp/v1/logs", content=body, headers={"Content-Type": ctype})
    _no_server_error(r, f"{kind} {n} {ctype}")
    assert r.status_code != 503, "a body that cannot be read is the client's 400"


# -- LogQL and Go templates -----------------------------------------------------------------

def _logql(kind: str, n: int) -> str:
    if kind == "sum":
        return "sum(" * n + 'count_over_time({app="fz"}[1m])' + ")" * n
    if kind == "parens":
        return "(" * n + "1" + ")" * n
    if kind == "label-filter":
        return '{app="fz"} | ' + "(" * n + 'a="1"' + ")" * n
    if kind == "label-filter-chain":
        return '{app="fz"} | ' + ", ".join(f'a{i}="1"' for i in range(n))
    if kind == "power":
        return " ^ ".join(["2"] * (n + 1))
    if kind == "or":
        return " or ".join(['count_over_time({app="fz"}[1m])'] * (n + 1))
    if kind == "label_replace":
        return 'label_replace(' * n + 'count_over_time({app="fz"}[1m])' + \
            ', "a", "b", "c", "(.*)")' * n
    return '{app="fz"}' + ' |= "x"' * n


def _template(kind: str, n: int) -> str:
    if kind == "if":
        return "{{if 1}}" * n + "x" + "{{end}}" * n
    if kind == "with-range":
        return "{{with .a}}{{range $i := .}}" * n + "x" + "{{end}}{{end}}" * n
    if kind == "else-if":
        return "{{if 0}}" + "{{else if 0}}" * n + "{{else}}x{{end}}"
    if kind == "parens":
        return "{{" + "(" * n + "1" + ")" * n + "}}"
    if kind == "unclosed":
        return "{{if 1}}" * n
    return "{{.a}}" * n  # fan-out


@given(kind=st.sampled_from(["sum", "parens", "label-filter", "label-filter-chain", "power",
                             "or", "label_replace", "filters"]), n=depths, instant=st.booleans())
@SETTINGS
def test_logql_never_5xx(server, kind, n, instant):
    query = _logql(kind, n)
    path = "/loki/api/v1/query" if instant else "/loki/api/v1/query_range"
    r = server.post(path, data={"query": query, "start": str(time.time_ns() - 3600 * NS),
                                "end": str(time.time_ns()), "step": "60"})
    _no_server_error(r, query)


@given(kind=st.sampled_from(["if", "with-range", "else-if", "parens", "unclosed", "fan-out"]),
       n=depths, stage=st.sampled_from(["line_format", "label_format b="]))
@example(kind="if", n=3000, stage="line_format")  # issue 28, row 5
@SETTINGS
def test_templates_never_5xx(server, kind, n, stage):
    query = '{app="fz"} | ' + stage + "`" + _template(kind, n) + "`"
    r = server.post("/loki/api/v1/query_range", data={
        "query": query, "start": str(time.time_ns() - 3600 * NS), "end": str(time.time_ns())})
    _no_server_error(r, query)
    assert r.status_code in (200, 400)


# -- rule YAML ------------------------------------------------------------------------------

RULE = "name: g\nrules:\n  - alert: a\n    expr: 'sum(rate({a=\"b\"}[1m])) > 1'\n    labels: "


def _rule_yaml(kind: str, n: int) -> str:
    if kind == "flow-mappings":
        return RULE + "{a: " * n + "b" + "}" * n + "\n"
    if kind == "flow-sequences":
        return "[" * n + "]" * n
    if kind in ("block", "block-sequences"):  # indentation grows with depth: quadratic
        n = min(n, 1000)
        item = "a:" if kind == "block" else "-"
        return "".join("  " * i + item + "\n" for i in range(n)) + "  " * n + "b\n"
    if kind == "unclosed":
        return RULE + "{a: " * n
    if kind == "aliases":  # fan-out: each level refers to the previous one ten times
        doc = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        doc += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]"
                for i in range(1, min(n, 30) + 1)]
        return "\n".join(doc) + "\n" + RULE + f"*a{min(n, 30)}\n"
    return RULE + "{" + ", ".join(f"k{i}: v" for i in range(n)) + "}\n"  # wide labels


@given(kind=st.sampled_from(["flow-mappings", "flow-sequences", "block", "block-sequences",
                             "unclosed", "aliases", "wide"]), n=depths)
@example(kind="flow-mappings", n=5000)  # issue 28, row 4
@example(kind="flow-sequences", n=50_000)
@SETTINGS
def test_rule_yaml_never_5xx(server, kind, n):
    body = _rule_yaml(kind, n)
    r = server.post("/loki/api/v1/rules/fuzz", content=body,
                    headers={"Content-Type": "application/yaml"})
    _no_server_error(r, body)


# -- dashboard JSON -------------------------------------------------------------------------

@given(field=st.sampled_from(["panels", "templating", "annotations", "title", "x"]),
       value=json_values, path=st.sampled_from(["/api/dashboards/db", "/api/dashboards/import",
                                                "/api/folders"]))
@example(field="panels", value=_json_nest("array", 40_000), path="/api/dashboards/db")  # row 3
@SETTINGS
def test_dashboard_json_never_5xx(server, field, value, path):
    body = '{"dashboard":{"title":"fz","%s":%s},"overwrite":true,"title":%s}' % (
        field, value, value)
    r = server.post(path, content=body, auth=ADMIN, headers={"Content-Type": "application/json"})
    _no_server_error(r, body)
    if r.status_code == 200 and path == "/api/dashboards/db":
        uid = r.json()["uid"]
        assert server.get(f"/api/dashboards/uid/{uid}", auth=ADMIN).status_code == 200
