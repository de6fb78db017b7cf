"""POST /otlp/v1/logs (http-api.md §3): mapping, encodings, every error answer, and the
OpenTelemetry Python SDK against a real server."""

from __future__ import annotations

import gzip
import json
import logging
import time

import httpx
import lz4.frame
import pytest
import zstandard
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

OTLP = "/otlp/v1/logs"
PB = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
CATEGORIZE = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


def _attr(key: str, value: dict) -> dict:
    return {"key": key, "value": value}


def example(ts: int) -> dict:
    """The mapping example of http-api.md §3.5, as OTLP/JSON."""
    return {"resourceLogs": [{
        "resource": {"attributes": [_attr("service.name", {"stringValue": "checkout"}),
                                    _attr("k8s.pod.name", {"stringValue": "co-7f9"}),
                                    _attr("host.name", {"stringValue": "n1"})]},
        "scopeLogs": [{"scope": {"name": "otel.py", "version": "1.2"}, "logRecords": [{
            "timeUnixNano": str(ts), "severityNumber": 9, "severityText": "INFO",
            "body": {"stringValue": "paid"},
            "attributes": [_attr("order.id", {"intValue": "42"})],
            "traceId": TRACE, "spanId": SPAN}]}]}]}


EXAMPLE_STREAM = {"k8s_pod_name": "co-7f9", "service_name": "checkout"}
EXAMPLE_METADATA = {"order_id": "42", "severity_number": "9", "severity_text": "INFO",
                    "trace_id": TRACE, "span_id": SPAN, "host_name": "n1",
                    "scope_name": "otel.py", "scope_version": "1.2", "detected_level": "info"}


def to_protobuf(document: dict) -> bytes:
    """OTLP/JSON ids are hex; protobuf's JSON mapping wants base64: convert, then encode."""
    import base64

    def fix(node):
        if isinstance(node, dict):
            return {k: (base64.b64encode(bytes.fromhex(v)).decode()
                        if k in ("traceId", "spanId") else fix(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [fix(x) for x in node]
        return node
    return json_format.ParseDict(fix(document), ExportLogsServiceRequest()).SerializeToString()


def read_back(client, query: str = '{service_name="checkout"}') -> list:
    r = client.get("/logstore/api/v1/query_range", headers=CATEGORIZE,
                   params={"query": query, "start": str(time.time_ns() - 3600 * 10**9)})
    assert r.status_code == 200, r.text
    return [(s["stream"], v[1], v[2].get("structuredMetadata", {}))
            for s in r.json()["data"]["result"] for v in s["values"]]


def status(r) -> tuple[int, str, str]:
    return (r.status_code, r.headers["content-type"],
            status_pb2.Status.FromString(r.content).message)


@pytest.mark.parametrize("kind", ["json", "json-charset", "protobuf"])
def test_the_spec_example_maps_exactly(client, kind):
    ts = time.time_ns() - 10**9
    doc = example(ts)
    if kind == "protobuf":
        r = client.post(OTLP, content=to_protobuf(doc), headers=PB)
    else:
        ctype = "application/json; charset=utf-8" if kind == "json-charset" else JSON[
            "Content-Type"]
        r = client.post(OTLP, content=json.dumps(doc), headers={"Content-Type": ctype})
    assert (r.status_code, r.content) == (204, b"")
    assert read_back(client) == [(EXAMPLE_STREAM, "paid", EXAMPLE_METADATA)]
    r = client.get("/logstore/api/v1/query_range", params={
        "query": '{service_name="checkout"} | trace_id="%s"' % TRACE,
        "start": str(ts - 10**9)})
    assert [v[0] for s in r.json()["data"]["result"] for v in s["values"]] == [str(ts)]


@pytest.mark.parametrize("encoding, compress", [
    ("gzip", gzip.compress), ("zstd", lambda b: zstandard.ZstdCompressor().compress(b)),
    ("lz4", lz4.frame.compress)])
def test_encodings(client, encoding, compress):
    body = compress(to_protobuf(example(time.time_ns() - 10**9)))
    r = client.post(OTLP, content=body, headers={**PB, "Content-Encoding": encoding})
    assert r.status_code == 204
    assert [line for _, line, _ in read_back(client)] == ["paid"]


def test_a_cut_zstd_body_is_refused_not_stored(client):
    """A zstd body cut after a finished block inflates cleanly to a valid prefix (two OTLP
    messages concatenated are one valid message): it must be refused like a cut gzip body."""
    first = to_protobuf(example(time.time_ns() - 2 * 10**9))
    second = to_protobuf(example(time.time_ns() - 10**9))
    z = zstandard.ZstdCompressor().compressobj()
    head = z.compress(first) + z.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    whole = head + z.compress(second) + z.flush()
    assert zstandard.ZstdDecompressor().stream_reader(head).read() == first  # a clean prefix
    r = client.post(OTLP, content=whole, headers={**PB, "Content-Encoding": "zstd"})
    assert r.status_code == 204
    assert len(read_back(client)) == 2
    for encoding, cut in [("zstd", head),
                          ("gzip", gzip.compress(first + second)[:-12]),
                          ("lz4", lz4.frame.compress(first + second)[:-8])]:
        r = client.post(OTLP, content=cut, headers={**PB, "Content-Encoding": encoding})
        assert r.status_code == 400, (encoding, r.status_code)
        assert status(r)[2].startswith(f"{encoding}: invalid compressed body"), encoding
    assert len(read_back(client)) == 2  # nothing of the cut bodies was stored


def record(body: dict, **extra) -> dict:
    return {"resourceLogs": [{"resource": {"attributes": [
        _attr("service.name", {"stringValue": "svc"})]}, "scopeLogs": [{"logRecords": [
            {"timeUnixNano": str(time.time_ns() - 10**9), "body": body, **extra}]}]}]}


@pytest.mark.parametrize("body, line", [
    ({"stringValue": "plain text"}, "plain text"),
    ({"intValue": "-7"}, "-7"),
    ({"doubleValue": 0.5}, "0.5"),
    ({"doubleValue": 1e21}, "1000000000000000000000"),
    ({"boolValue": True}, "true"),
    ({"bytesValue": "aGk="}, "aGk="),
    ({"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "a"}]}}, '[1,"a"]'),
    ({"kvlistValue": {"values": [_attr("z", {"boolValue": False}),
                                 _attr("a", {"doubleValue": 2.5})]}}, '{"a":2.5,"z":false}'),
    ({}, ""),
])
def test_body_rendering(client, body, line):
    r = client.post(OTLP, content=json.dumps(record(body)), headers=JSON)
    assert r.status_code == 204
    assert [got for _, got, _ in read_back(client, '{service_name="svc"}')] == [line]


def test_attribute_maps_flatten_and_names_sanitise(client):
    attrs = [_attr("http.request", {"kvlistValue": {"values": [
        _attr("method", {"stringValue": "GET"}),
        _attr("header", {"kvlistValue": {"values": [_attr("x-id", {"intValue": "9"})]}})]}}),
        _attr("2fa.used", {"boolValue": True}), _attr("event_name", {"stringValue": "dup"})]
    doc = record({"stringValue": "x"}, attributes=attrs, eventName="login",
                 observedTimeUnixNano=str(time.time_ns()), flags=1, droppedAttributesCount=2)
    assert client.post(OTLP, content=json.dumps(doc), headers=JSON).status_code == 204
    (_, _, md), = read_back(client, '{service_name="svc"}')
    observed = md.pop("observed_timestamp")
    assert observed.isdigit()
    assert md == {"http_request_method": "GET", "http_request_header_x_id": "9",
                  "key_2fa_used": "true", "dropped_attributes_count": "2", "flags": "1",
                  "event_name": "login", "detected_level": "unknown"}


def test_timestamp_falls_back_to_observed_time(client):
    observed = time.time_ns() - 5 * 10**9
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"observedTimeUnixNano": str(observed), "body": {"stringValue": "late"}}]}]}]}
    assert client.post(OTLP, content=json.dumps(doc), headers=JSON).status_code == 204
    r = client.get("/logstore/api/v1/query_range",
                   params={"query": '{service_name="unknown_service"}'})
    assert [v for s in r.json()["data"]["result"] for v in s["values"]] == [
        [str(observed), "late"]]


def test_otlp_config_rules(make_client):
    client = make_client({"limits_config": {"otlp_config": {
        "resource_attributes": {"ignore_defaults": True, "attributes_config": [
            {"action": "index_label", "attributes": ["service.name", "host.name"]},
            {"action": "drop", "regex": "k8s\\..*"}]},
        "log_attributes": [{"action": "index_label", "attributes": ["tier"]},
                           {"action": "drop", "attributes": ["order.id"]}],
        "scope_attributes": [{"action": "drop", "regex": ".*"}],
        "severity_text_as_label": True}}})
    doc = example(time.time_ns() - 10**9)
    record_ = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    record_["attributes"].append(_attr("tier", {"stringValue": "gold"}))
    doc["resourceLogs"][0]["scopeLogs"][0]["scope"]["attributes"] = [
        _attr("lib", {"stringValue": "x"})]
    assert client.post(OTLP, content=json.dumps(doc), headers=JSON).status_code == 204
    assert read_back(client) == [(
        {"host_name": "n1", "service_name": "checkout", "severity_text": "INFO",
         "tier": "gold"}, "paid",
        # severity_text stays structured metadata too; at query time it meets the stream
        # label of the same name and is reported with the `_extracted` suffix
        {"severity_number": "9", "severity_text_extracted": "INFO", "trace_id": TRACE,
         "span_id": SPAN, "scope_name": "otel.py", "scope_version": "1.2",
         "detected_level": "info"})]


@pytest.fixture(scope="module")
def refusing(tmp_path_factory, storage_state):
    """One app for the refused bodies: none of them stores anything."""
    from tests.conftest import module_client

    with module_client(tmp_path_factory, storage_state) as client:
        yield client


@pytest.mark.parametrize("headers, body, expected", [
    ({"Content-Type": "text/plain"}, b"x", (400, "content type: text/plain is not supported")),
    ({}, b"x", (400, "content type:  is not supported")),
    ({**PB, "Content-Encoding": "br"}, b"x",
     (400, "unsupported content encoding br: only gzip, lz4 and zstd are supported")),
    ({**PB, "Content-Encoding": "gzip"}, b"not gzip", None),
    (PB, b"\xff\xff\xff", None),
    (JSON, b"{not json", None),
    (PB, b"", (422, "error at least one valid stream is required for ingestion")),
    (JSON, b'{"resourceLogs":[]}',
     (422, "error at least one valid stream is required for ingestion")),
])
def test_error_answers(refusing, headers, body, expected):
    r = refusing.post(OTLP, content=body, headers=headers)
    code, ctype, message = status(r)
    assert ctype == "application/octet-stream"
    if expected is None:  # a broken body: 400, the reason named, nothing stored
        assert code == 400 and message
    else:
        assert (code, message) == expected


def test_size_limits_and_a_compression_bomb(make_client):
    client = make_client({"distributor": {"max_recv_msg_size": "2KB",
                                          "max_decompressed_size": "64KB"}})
    r = client.post(OTLP, content=b"\0" * 4096, headers=PB)
    assert status(r)[::2] == (413, "request body too large: message size too large than "
                                   "max (4096 vs 2048)")
    bomb = zstandard.ZstdCompressor(level=19).compress(b"\0" * (10 << 20))
    assert len(bomb) < 2048
    r = client.post(OTLP, content=bomb, headers={**PB, "Content-Encoding": "zstd"})
    assert status(r)[::2] == (413, "request body too large: decompressed message size too "
                                   "large than max (65537 vs 65536)")


def test_validation_errors_are_push_errors(make_client):
    client = make_client({"limits_config": {"max_line_size": "10B"}})
    doc = record({"stringValue": "a line longer than ten bytes"})
    code, _, message = status(client.post(OTLP, content=json.dumps(doc), headers=JSON))
    assert code == 400
    assert message.startswith("max entry size '10' bytes exceeded for stream "
                              "'{service_name=\"svc\"}' while adding an entry with length")


def test_tenancy(make_client):
    client = make_client({"auth_enabled": True})
    doc = json.dumps(example(time.time_ns() - 10**9))
    assert status(client.post(OTLP, content=doc, headers=JSON))[::2] == (401, "no org id")
    assert status(client.post(OTLP, content=doc, headers={**JSON, "X-Scope-OrgID": "a|b"})
                  )[::2] == (400, "multiple org IDs present")
    r = client.post(OTLP, content=doc, headers={**JSON, "X-Scope-OrgID": "team-a"})
    assert r.status_code == 204
    r = client.get("/logstore/api/v1/query_range", headers={"X-Scope-OrgID": "team-b"},
                   params={"query": '{service_name="checkout"}'})
    assert r.json()["data"]["result"] == []


def test_opentelemetry_sdk_exporter_against_a_real_server(server):
    """OpenTelemetry's own SDK: LoggerProvider + OTLP/HTTP protobuf exporter + the logging
    bridge, pointed at /otlp/v1/logs; what it sent is read back over the query API."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    provider = LoggerProvider(resource=Resource.create({
        "service.name": "payments", "deployment.environment": "prod",
        "host.name": "box-1"}))
    exporter = OTLPLogExporter(endpoint=server.url + "/otlp/v1/logs", timeout=10)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = logging.getLogger("otel-sdk-test")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = LoggingHandler(level=logging.INFO, logger_provider=provider)
    logger.addHandler(handler)
    try:
        logger.warning("card declined", extra={"order.id": 7})
        logger.error("gateway timeout")
    finally:
        logger.removeHandler(handler)
        provider.shutdown()
    r = httpx.get(server.url + "/loki/api/v1/query_range", headers=CATEGORIZE,
                  params={"query": '{service_name="payments"}', "direction": "forward"})
    assert r.status_code == 200
    result = r.json()["data"]["result"]
    got = [(s["stream"], v[1], v[2]["structuredMetadata"]) for s in result for v in s["values"]]
    assert [line for _, line, _ in got] == ["card declined", "gateway timeout"]
    stream = got[0][0]
    assert stream["service_name"] == "payments"
    assert stream["deployment_environment"] == "prod"
    # the SDK adds service.instance.id, on Loki's index-label list
    assert set(stream) == {"service_name", "deployment_environment", "service_instance_id"}
    first, second = got[0][2], got[1][2]
    assert (first["severity_text"], first["severity_number"], first["detected_level"]) == \
        ("WARN", "13", "warn")
    assert (second["severity_text"], second["detected_level"]) == ("ERROR", "error")
    assert first["order_id"] == "7"
    assert first["host_name"] == "box-1"
    assert first["scope_name"] == "otel-sdk-test"
    assert first["telemetry_sdk_language"] == "python"
