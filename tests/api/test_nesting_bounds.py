"""No request a client can send gets a 5xx (issue 28): every recursive decoder and parser has
a nesting bound (logql/depth.py), past which the request is a 400 naming the bound; a log line
is data and is stored however deep it nests. One test per row of the issue's table, against a
real server with `auth_enabled: true`, each with the boundary next to it; and unexpected
errors answer a request id, never a traceback or the exception's text."""

from __future__ import annotations

import json
import logging
import time

import httpx
import pytest
from google.rpc import status_pb2

from logql.depth import MAX_DEPTH, MAX_TEMPLATE_DEPTH

TENANT = {"X-Scope-OrgID": "deep"}
JSON_HEADERS = {**TENANT, "Content-Type": "application/json"}
ADMIN = ("admin", "nesting-admin-pass")
NS = 10**9
JSON_TOO_DEEP = f"exceeded max depth of {MAX_DEPTH}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.conftest import LogstoreServer
    srv = LogstoreServer(tmp_path_factory.mktemp("nesting") / "data", {
        "auth_enabled": True,
        "grafana": {"admin_password": ADMIN[1], "disable_brute_force_login_protection": True},
        "limits_config": {"reject_old_samples": False},
        "pattern_ingester": {"enabled": True}}).start()
    yield srv
    srv.stop()


def nested_object(n: int, leaf: str = "1") -> str:
    return '{"a":' * n + leaf + "}" * n


def _values(r: httpx.Response) -> list[tuple[dict, str]]:
    assert r.status_code == 200, r.text
    return [(s["stream"], v[1]) for s in r.json()["data"]["result"] for v in s["values"]]


# -- row 1: a push whose line is JSON nested 40,000 deep ------------------------------------

def test_a_line_nested_40000_deep_is_stored_and_every_read_of_it_answers(server):
    now = time.time_ns()
    line = nested_object(40_000)
    r = httpx.post(server.url + "/loki/api/v1/push", headers=JSON_HEADERS, content=json.dumps(
        {"streams": [{"stream": {"app": "deepline"}, "values": [[str(now), line]]}]}))
    assert (r.status_code, r.text) == (204, "")
    window = {"start": str(now - 60 * NS), "end": str(now + NS)}
    r = httpx.get(server.url + "/loki/api/v1/query_range", headers=TENANT, params={
        "query": '{app="deepline"}', **window})
    assert [v for _, v in _values(r)] == [line]
    r = httpx.get(server.url + "/loki/api/v1/query_range", headers=TENANT, params={
        "query": '{app="deepline"} | json', **window})
    ((labels, got),) = _values(r)
    assert got == line
    assert (labels["__error__"], labels["__error_details__"]) == (
        "JSONParserErr", "exceeded max depth")
    r = httpx.get(server.url + "/loki/api/v1/query_range", headers=TENANT, params={
        "query": '{app="deepline"} | json x="a.a"', **window})
    assert [labels.get("x") for labels, _ in _values(r)] == [""]
    for path in ("detected_fields", "patterns", "detected_labels"):
        r = httpx.get(server.url + f"/loki/api/v1/{path}", headers=TENANT,
                      params={"query": '{app="deepline"}', **window})
        assert r.status_code == 200, (path, r.text)


def test_a_line_nested_900_deep_is_still_parsed_by_json(server):
    now = time.time_ns()
    r = httpx.post(server.url + "/loki/api/v1/push", headers=JSON_HEADERS, content=json.dumps(
        {"streams": [{"stream": {"app": "line900"}, "values": [[str(now), nested_object(900)]]}]}))
    assert r.status_code == 204
    r = httpx.get(server.url + "/loki/api/v1/query_range", headers=TENANT, params={
        "query": '{app="line900"} | json', "start": str(now - NS), "end": str(now + NS)})
    ((labels, _),) = _values(r)
    assert labels["_".join(["a"] * 900)] == "1" and "__error__" not in labels


def test_a_push_body_with_an_unknown_field_nested_past_the_decoder_is_400(server):
    body = '{"streams":[],"extra":' + "[" * 40_000 + "]" * 40_000 + "}"
    r = httpx.post(server.url + "/loki/api/v1/push", headers=JSON_HEADERS, content=body)
    assert (r.status_code, r.text) == (400, f"invalid push request: {JSON_TOO_DEEP}\n")


# -- row 2: OTLP/JSON with an attribute kvlistValue nested 3,000 deep -----------------------

def _otlp_body(kvlist_levels: int) -> str:
    value = '{"stringValue":"x"}'
    for _ in range(kvlist_levels):
        value = '{"kvlistValue":{"values":[{"key":"k","value":' + value + "}]}}"
    return ('{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":'
            '{"stringValue":"otlpdeep"}},{"key":"a","value":' + value + '}]},"scopeLogs":'
            '[{"logRecords":[{"timeUnixNano":"%d","body":{"stringValue":"hello"}}]}]}]}'
            % time.time_ns())


def test_otlp_json_nested_3000_deep_is_400_with_the_bound(server):
    r = httpx.post(server.url + "/otlp/v1/logs", headers=JSON_HEADERS, content=_otlp_body(3000))
    assert r.status_code == 400
    assert status_pb2.Status.FromString(r.content).message == (
        f"failed to unmarshal request: {JSON_TOO_DEEP}")


def test_otlp_json_nested_a_few_levels_is_stored(server):
    r = httpx.post(server.url + "/otlp/v1/logs", headers=JSON_HEADERS, content=_otlp_body(3))
    assert r.status_code == 204, r.content
    r = httpx.get(server.url + "/loki/api/v1/query_range", headers=TENANT, params={
        "query": '{service_name="otlpdeep"}', "since": "1h"})
    assert [v for _, v in _values(r)] == ["hello"]


# -- row 3: a dashboard with panels (or any field) nested 40,000 deep -----------------------

def _dashboard(field: str, nesting: str) -> str:
    return '{"dashboard":{"title":"deep %s","%s":%s},"overwrite":true}' % (
        field, field, nesting)


@pytest.mark.parametrize("field", ["panels", "templating", "anything"])
def test_a_dashboard_nested_40000_deep_is_400_with_the_bound(server, field):
    r = httpx.post(server.url + "/api/dashboards/db", auth=ADMIN, headers=JSON_HEADERS,
                   content=_dashboard(field, "[" * 40_000 + "]" * 40_000))
    assert (r.status_code, r.json()) == (400, {"message": f"bad request data: {JSON_TOO_DEEP}"})


def test_a_dashboard_at_the_bound_is_saved_and_read_back_one_past_is_not(server):
    # the body's own two levels ({"dashboard": {...}}) count
    deep = nested_object(MAX_DEPTH - 2, '"leaf"')
    r = httpx.post(server.url + "/api/dashboards/db", auth=ADMIN, headers=JSON_HEADERS,
                   content=_dashboard("deepest", deep))
    assert r.status_code == 200, r.text
    r = httpx.get(server.url + f"/api/dashboards/uid/{r.json()['uid']}", auth=ADMIN)
    assert r.status_code == 200
    assert json.dumps(r.json()["dashboard"]["deepest"], separators=(",", ":")) == deep
    r = httpx.post(server.url + "/api/dashboards/db", auth=ADMIN, headers=JSON_HEADERS,
                   content=_dashboard("deeper", nested_object(MAX_DEPTH - 1, '"leaf"')))
    assert (r.status_code, r.json()) == (400, {"message": f"bad request data: {JSON_TOO_DEEP}"})


# -- row 4: rule group YAML nested 5,000 deep, or [[[…]]] 50,000 deep -----------------------

RULE_PREFIX = ("name: g\nrules:\n  - alert: a\n    expr: 'sum(rate({a=\"b\"}[1m])) > 1'\n"
               "    labels: ")
YAML_TOO_DEEP = f"unable to decoded rule group: yaml: exceeded max depth of {MAX_DEPTH}\n"


@pytest.mark.parametrize("body", [
    RULE_PREFIX + "{a: " * 5000 + "b" + "}" * 5000 + "\n",
    "[" * 50_000 + "]" * 50_000,
], ids=["flow-mappings-5000", "sequences-50000"])
def test_rule_yaml_nested_deeply_is_400_with_the_bound(server, body):
    r = httpx.post(server.url + "/loki/api/v1/rules/ns", headers={
        **TENANT, "Content-Type": "application/yaml"}, content=body)
    assert (r.status_code, r.text) == (400, YAML_TOO_DEEP)


def test_rule_yaml_under_the_bound_is_decoded_as_before(server):
    headers = {**TENANT, "Content-Type": "application/yaml"}
    r = httpx.post(server.url + "/loki/api/v1/rules/ns", headers=headers,
                   content="[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    assert (r.status_code, r.text) == (400, "unable to decoded rule group\n")
    r = httpx.post(server.url + "/loki/api/v1/rules/ns", headers=headers,
                   content=RULE_PREFIX + "{a: {b: c}}\n")
    assert (r.status_code, r.text) == (400, "unable to decoded rule group\n")


# -- row 5: line_format with {{if 1}} nested 3,000 deep -------------------------------------

def _line_format(levels: int) -> str:
    return ('{app="deepline"} | line_format "' + "{{if 1}}" * levels + "x"
            + "{{end}}" * levels + '"')


def test_a_template_nested_3000_deep_is_400_with_the_bound(server):
    now = time.time_ns()
    r = httpx.post(server.url + "/loki/api/v1/query_range", headers=TENANT, data={
        "query": _line_format(3000), "start": str(now - 3600 * NS), "end": str(now)})
    assert (r.status_code, r.text) == (
        400, "invalid line template: template: line:1: max expression depth exceeded "
             f"(limit {MAX_TEMPLATE_DEPTH})")


def test_a_template_at_the_bound_renders(server):
    now = time.time_ns()
    r = httpx.post(server.url + "/loki/api/v1/push", headers=JSON_HEADERS, content=json.dumps(
        {"streams": [{"stream": {"app": "tmpl"}, "values": [[str(now), "line"]]}]}))
    assert r.status_code == 204
    query = _line_format(MAX_TEMPLATE_DEPTH).replace("deepline", "tmpl")
    r = httpx.post(server.url + "/loki/api/v1/query_range", headers=TENANT, data={
        "query": query, "start": str(now - NS), "end": str(now + NS)})
    assert [v for _, v in _values(r)] == ["x"]
    parens = '{app="tmpl"} | line_format `{{ ' + "(" * MAX_TEMPLATE_DEPTH + '"y"' + \
        ")" * MAX_TEMPLATE_DEPTH + " }}`"
    r = httpx.post(server.url + "/loki/api/v1/query_range", headers=TENANT, data={
        "query": parens, "start": str(now - NS), "end": str(now + NS)})
    assert [v for _, v in _values(r)] == ["y"]


# -- unexpected errors: a request id, never the exception ------------------------------------

class _Records(logging.Handler):
    """What logstore's error logger wrote (the app's loggers do not propagate to caplog)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> "_Records":
        logging.getLogger("logstore.http").addHandler(self)
        return self

    def __exit__(self, *_) -> None:
        logging.getLogger("logstore.http").removeHandler(self)


def _app_raising(handlers: dict, path: str):
    """A Litestar app with logstore's own error handlers and one route that fails with an
    exception whose text must not reach the client."""
    from litestar import Litestar, get

    @get(path)
    async def broken() -> None:
        raise RuntimeError("secret /var/lib/logstore/db.sqlite detail")

    return Litestar([broken], exception_handlers=handlers)


def test_an_unexpected_error_answers_500_with_a_request_id_the_log_carries():
    from litestar.testing import TestClient

    from routes.errors import EXCEPTION_HANDLERS
    with TestClient(_app_raising(EXCEPTION_HANDLERS, "/boom")) as client, _Records() as log:
        r = client.get("/boom")
    request_id = r.headers["X-Request-Id"]
    assert len(request_id) == 16
    assert (r.status_code, r.text) == (500, f"Internal Server Error (request id {request_id})\n")
    (record,) = [rec for rec in log.records if request_id in rec.getMessage()]
    assert record.exc_info and "secret" in str(record.exc_info[1])


def test_an_unexpected_grafana_error_answers_its_json_with_the_request_id():
    from litestar.testing import TestClient

    from routes.grafana.api import handle_unexpected
    with TestClient(_app_raising({Exception: handle_unexpected}, "/api/boom")) as client, \
            _Records() as log:
        r = client.get("/api/boom")
    request_id = r.headers["X-Request-Id"]
    assert (r.status_code, r.json()) == (500, {"message": "Internal Server Error",
                                                "requestId": request_id})
    assert any(request_id in rec.getMessage() and rec.exc_info for rec in log.records)
