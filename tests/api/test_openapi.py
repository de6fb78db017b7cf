"""logstore's OpenAPI schema (issue 15): every route of the app is in it with its
parameters, and Schemathesis, driving a real server on loopback from that schema with a
bounded number of generated requests per operation, finds no server error and no answer
the schema does not describe (status, content type, body)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.hooks import HookDispatcher, HookScope
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance,
                                               response_schema_conformance,
                                               status_code_conformance)

ADMIN = ("admin", "fuzz-admin-pass")
# operations that stop the server or would lock the fuzzer out of the rest
SKIPPED = r"^/(ingester/|(loki|logstore)/api/v1/tail|api/(compat|prom)/tail|api/user/password" \
          r"|api/admin/users)"
EXAMPLES = 8   # generated requests per operation: the whole run stays under a minute
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


def test_every_route_is_in_the_schema(client):
    doc = client.get("/openapi.json").json()
    routes = {re.sub(r"\{(\w+):\w+\}", r"{\1}", r.path) for r in client.app.routes}
    assert sorted(routes - set(doc["paths"])) == []
    qr = doc["paths"]["/logstore/api/v1/query_range"]["get"]
    assert [p["name"] for p in qr["parameters"]] == [
        "X-Scope-OrgID", "query", "start", "end", "since", "step", "interval", "limit",
        "direction"]
    assert doc["paths"]["/loki/api/v1/query_range"] == doc["paths"][
        "/logstore/api/v1/query_range"]


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory):
    from tests.conftest import LogstoreServer
    server = LogstoreServer(tmp_path_factory.mktemp("fuzz") / "data", {
        "grafana": {"admin_password": ADMIN[1], "disable_brute_force_login_protection": True},
        "limits_config": {"query_timeout": "5s", "reject_old_samples": False}}).start()
    r = httpx.post(server.url + "/logstore/api/v1/push", json={"streams": [
        {"stream": {"app": "fuzz"}, "values": [["1700000000000000000", "level=info x=1"]]}]})
    assert r.status_code == 204
    yield server
    server.stop()


def _summary(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)
    if inner:
        return " | ".join(_summary(e) for e in inner)
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return " / ".join(lines[:4])


# Deep nesting (issue 28): a generated body gets a value nested this deep in place of a
# field and as an extra one. The value travels as a marker string and is spliced into the
# encoded body, because encoding 40,000 levels would overflow the client's json.dumps.
DEEP = re.compile(r'"\\u0000deep:(\d+):(\w+)"')


def _deep_text(n: int, kind: str) -> str:
    return "[" * n + "]" * n if kind == "array" else '{"a":' * n + "1" + "}" * n


def _deepen(body, n: int, kind: str):
    marker = f"\x00deep:{n}:{kind}"
    if isinstance(body, dict):
        out = dict(body)
        for key in list(out)[:1]:
            out[key] = marker
        out["deep"] = marker
        return out
    if isinstance(body, list):
        return [marker, *body]
    if isinstance(body, str):  # YAML and other text: flow collections as deep
        return body + "\ndeep: " + _deep_text(n, "array") + "\n"
    return body


def flatmap_body(context, body):
    return st.tuples(st.sampled_from([201, 1000, 40_000]), st.sampled_from(["array", "object"])
                     ).map(lambda nk: _deepen(body, *nk))


DEEP_HOOKS = HookDispatcher(scope=HookScope.TEST)
DEEP_HOOKS.register_hook_with_name(flatmap_body, "flatmap_body")


def _send(case, base_url: str) -> httpx.Response:
    """The generated request, sent with httpx: Schemathesis' own transport breaks under
    urllib3-future, which grafana-client's niquests installs over urllib3."""
    kw = case.as_transport_kwargs(base_url=base_url)
    data = kw.get("data")
    if isinstance(data, dict):
        data = {k: DEEP.sub(lambda m: _deep_text(int(m[1]), m[2]), json.dumps(v))[1:-1]
                if isinstance(v, str) and v.startswith("\x00deep:") else v
                for k, v in data.items()}
    body = {"data": data} if isinstance(data, dict) else {"content": data}
    if "json" in kw:
        text = DEEP.sub(lambda m: _deep_text(int(m[1]), m[2]), json.dumps(kw["json"]))
        body = {"content": text.encode()}
        kw["headers"] = {**(kw.get("headers") or {}), "Content-Type": "application/json"}
    return httpx.request(kw["method"], kw["url"], params=kw.get("params"),
                         headers=kw.get("headers"), cookies=kw.get("cookies"), auth=ADMIN,
                         timeout=60, **body)


def test_schemathesis_finds_no_server_error_and_no_undescribed_answer(fuzzed_server):
    schema = schemathesis.openapi.from_url(fuzzed_server.url + "/openapi.json").exclude(
        path_regex=SKIPPED)
    failures, operations = [], 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            case.validate_response(_send(case, fuzzed_server.url), checks=CHECKS)

        try:
            run()
        except BaseException as exc:  # noqa: BLE001 - Schemathesis' FailureGroup; gathered
            if isinstance(exc, KeyboardInterrupt):
                raise
            failures.append(f"{operation.method.upper()} {operation.path}: {_summary(exc)}")
    assert operations > 150
    assert failures == [], "\n".join(failures)


def test_schemathesis_deep_bodies_get_no_server_error(fuzzed_server):
    """Every operation that takes a body, with a value nested past every bound spliced into
    it (the flatmap_body hook above): 400s and the like are fine, a 5xx is not."""
    schema = schemathesis.openapi.from_url(fuzzed_server.url + "/openapi.json").exclude(
        path_regex=SKIPPED)
    failures, operations = [], 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.body:
            continue
        operations += 1

        @given(case=operation.as_strategy(hooks=DEEP_HOOKS))
        @settings(max_examples=4, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            r = _send(case, fuzzed_server.url)
            assert r.status_code < 500, (r.status_code, r.text[:200])

        try:
            run()
        except AssertionError as exc:
            failures.append(f"{operation.method.upper()} {operation.path}: {_summary(exc)}")
    assert operations > 20
    assert failures == [], "\n".join(failures)
