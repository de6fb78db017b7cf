"""`GET /openapi.json`: every route of the app with its parameters, bodies and answers.

Handlers read their parameters as Loki does (query string or form, Loki's own error texts),
so the framework cannot derive them from signatures; they are listed here, once per
canonical path, and the Loki-named aliases (`/loki/...`, `/api/prom/...`, `/prometheus/...`)
are added from routes/paths.py's table. tests/api/test_openapi.py checks that every route of
the app is described and runs Schemathesis against the schema on a real server.
"""

from __future__ import annotations

import re
from typing import Any

from litestar import Request, Response, get

from routes.paths import logstore_path

STR = {"type": "string"}
TEXT = "text/plain"
JSON = "application/json"
YAML = "application/yaml"

# -- parameters ------------------------------------------------------------------------------


def q(name: str, required: bool = False, schema: dict | None = None) -> dict:
    return {"name": name, "in": "query", "required": required, "schema": schema or STR}


def h(name: str) -> dict:
    return {"name": name, "in": "header", "required": False, "schema": STR}


TENANT = h("X-Scope-OrgID")
RANGE = [q("start"), q("end"), q("since")]
QUERY_RANGE = [q("query", True), *RANGE, q("step"), q("interval"), q("limit"),
               q("direction", schema={"type": "string", "enum": ["forward", "backward"]})]
INSTANT = [q("query", True), q("time"), q("limit"),
           q("direction", schema={"type": "string", "enum": ["forward", "backward"]})]
SELECTOR = [q("query"), *RANGE]
VOLUME = [q("query", True), *RANGE, q("limit"), q("targetLabels"),
          q("aggregateBy", schema={"type": "string", "enum": ["series", "labels"]})]
DETECTED = [q("query"), *RANGE, q("step"), q("line_limit"), q("limit"), q("field_limit")]
ARRAY = {"type": "array", "items": STR}

# -- answers ---------------------------------------------------------------------------------


def answers(ok: dict[str, tuple[str, ...]], errors: tuple[str, ...] = (TEXT,),
            json_schema: dict | None = None) -> dict:
    """Success statuses with their media types; any 4xx or 5xx with the error media types
    (Loki answers errors as plain text, Grafana's API and the rules API as JSON)."""
    def schema_of(media: str) -> dict:
        if media == JSON:
            return {"type": "object"} if json_schema is None else json_schema
        return {"type": "string"}

    out: dict[str, Any] = {}
    for status, types in ok.items():
        out[status] = {"description": "success"}
        if types:
            out[status]["content"] = {t: {"schema": schema_of(t)} for t in types}
    for status in ("4XX", "5XX"):
        out[status] = {"description": "refused, with the reason",
                       "content": {t: {"schema": schema_of(t)} for t in errors}}
    return out


READ = answers({"200": (JSON,)})
EMPTY = answers({"204": ()})
PAGE = answers({"200": (TEXT, "text/html", JSON, YAML)})
GRAFANA = answers({"200": (JSON,)}, (JSON,), json_schema={})  # objects and lists
RULES = answers({"200": (YAML, JSON), "202": (JSON,)}, (TEXT, JSON))

PUSH_BODY = {"content": {
    JSON: {"schema": {"type": "object", "required": ["streams"], "properties": {
        "streams": {"type": "array", "items": {"type": "object", "properties": {
            "stream": {"type": "object", "additionalProperties": STR},
            "values": {"type": "array", "items": {"type": "array", "items": STR,
                                                   "minItems": 2, "maxItems": 3}}}}}}}},
    "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}}}}
YAML_BODY = {"content": {YAML: {"schema": STR}}}
JSON_BODY = {"content": {JSON: {"schema": {"type": "object"}}}}


def op(params: list | None = None, responses: dict = READ, body: dict | None = None,
       tenant: bool = True) -> dict:
    out: dict[str, Any] = {"parameters": ([TENANT] if tenant else []) + list(params or []),
                           "responses": responses}
    if body is not None:
        out["requestBody"] = body
    return out


def read(params: list | None = None, responses: dict = READ) -> dict:
    """GET, and POST with the same parameters as a form (as Loki accepts them)."""
    return {"get": op(params, responses), "post": op(params, responses)}


def ops_page(methods: tuple[str, ...] = ("get",), params: list | None = None,
             responses: dict = PAGE) -> dict:
    return {m: op(params, responses, tenant=False) for m in methods}


L = "/logstore/api/v1"
PATHS: dict[str, dict[str, Any]] = {
    f"{L}/push": {"post": op(responses=EMPTY, body=PUSH_BODY)},
    f"{L}/query_range": read(QUERY_RANGE),
    f"{L}/query": read(INSTANT),
    f"{L}/format_query": read([q("query")], answers({"200": (JSON,)}, (TEXT, JSON))),
    f"{L}/labels": read(SELECTOR),
    f"{L}/label": read(SELECTOR),
    f"{L}/label/{{name}}/values": read([*SELECTOR]),
    f"{L}/series": read([q("match[]", schema=ARRAY), *RANGE]),
    f"{L}/index/stats": read([q("query", True), *RANGE]),
    f"{L}/index/volume": read(VOLUME),
    f"{L}/index/volume_range": read([*VOLUME, q("step")]),
    f"{L}/patterns": read([q("query", True), *RANGE, q("step")]),
    f"{L}/detected_labels": read(DETECTED),
    f"{L}/detected_fields": read(DETECTED),
    f"{L}/detected_field/{{name}}/values": read(DETECTED),
    f"{L}/tail": {"get": op([q("query", True), q("delay_for"), q("limit"), q("start")])},
    f"{L}/status/buildinfo": {"get": op(tenant=False)},
    f"{L}/rules": {"get": op([q("labels")], RULES)},
    f"{L}/rules/{{rest}}": {"get": op([], RULES), "post": op([], RULES, YAML_BODY),
                            "delete": op([], RULES)},
    f"{L}/delete": {
        "get": op(),
        "post": op([q("query", True), q("start", True), q("end"), q("max_interval")],
                   EMPTY),
        "put": op([q("query", True), q("start", True), q("end"), q("max_interval")], EMPTY),
        "delete": op([q("request_id", True), q("force")], EMPTY)},
    f"{L}/cache/generation_numbers": {"get": op(responses=answers({"200": (JSON,)},
                                                                  json_schema={}))},
    f"{L}/cache/generation_numbers/increase": {"post": op(responses=EMPTY)},
    "/api/compat/push": {"post": op(responses=EMPTY, body=PUSH_BODY)},
    "/api/compat/query": read([q("query"), q("regexp"), q("limit"), *RANGE,
                               q("direction", schema={"type": "string",
                                                      "enum": ["forward", "backward"]})]),
    "/api/compat/label": read(SELECTOR),
    "/api/compat/label/{name}/values": read(SELECTOR),
    "/api/compat/series": read([q("match[]", schema=ARRAY), *RANGE]),
    "/api/compat/tail": {"get": op([q("query", True), q("regexp"), q("delay_for"),
                                    q("limit"), q("start")])},
    "/api/compat/rules": {"get": op([q("labels")], RULES)},
    "/api/compat/rules/{rest}": {"get": op([], RULES), "post": op([], RULES, YAML_BODY),
                                 "delete": op([], RULES)},
    "/compat/api/v1/rules": {"get": op([q("type"), q("rule_name[]", schema=ARRAY),
                                        q("rule_group[]", schema=ARRAY),
                                        q("file[]", schema=ARRAY)], RULES)},
    "/compat/api/v1/alerts": {"get": op(responses=RULES)},
    "/otlp/v1/logs": {"post": op(responses=answers({"200": (JSON, "application/x-protobuf")},
                                                   (TEXT, JSON, "application/octet-stream")),
                                 body={"content": {
                                     "application/x-protobuf": {"schema": {
                                         "type": "string", "format": "binary"}},
                                     JSON: {"schema": {"type": "object"}}}})},
    "/ready": ops_page(), "/metrics": ops_page(), "/services": ops_page(),
    "/config": ops_page(params=[q("mode")]),
    "/runtime_config": ops_page(params=[q("mode")]),
    "/log_level": ops_page(("get", "post"), [q("log_level")],
                           answers({"200": (TEXT, JSON)}, (TEXT, JSON))),
    "/flush": ops_page(("get", "post"), responses=answers({"204": ()})),
    "/flush/tenant": ops_page(("post",), [q("streams")], answers({"204": ()})),
    "/ingester/prepare_shutdown": ops_page(("get", "post", "delete")),
    "/ingester/shutdown": ops_page(("get", "post"), [q("flush"), q("delete_ring_tokens"),
                                                     q("terminate")],
                                   answers({"204": ()})),
    "/openapi.json": ops_page(responses=answers({"200": (JSON,)})),
    # Grafana's session login (routes/grafana/session.py)
    "/login": {"post": op(responses=GRAFANA, body={"content": {JSON: {"schema": {
        "type": "object", "properties": {"user": STR, "password": STR}}}}}, tenant=False)},
    "/logout": {"get": op(responses=answers({"302": ()}, (JSON,)), tenant=False)},
    # the web page (routes/ui.py): 304 when If-None-Match names the file's ETag
    "/": ops_page(params=[h("If-None-Match")],
                  responses=answers({"200": ("text/html",), "304": ()})),
    "/ui/{name}": ops_page(params=[h("If-None-Match")], responses=answers(
        {"200": ("text/javascript", "text/css", "image/svg+xml"), "304": ()})),
}
for ring in ("/ring", "/distributor/ring", "/ruler/ring", "/compactor/ring",
             "/indexgateway/ring", "/scheduler/ring", "/pattern/ring"):
    PATHS[ring] = ops_page(("get", "post"))

SEARCH = [q("query"), q("tag", schema=ARRAY), q("type"), q("dashboardUIDs", schema=ARRAY),
          q("dashboardIds", schema=ARRAY), q("folderUIDs", schema=ARRAY),
          q("folderIds", schema=ARRAY), q("starred"), q("limit"), q("page"), q("sort"),
          q("permission"), q("deleted")]
PAGING = [q("query"), q("perpage"), q("page")]


def _grafana_op(method: str, path: str) -> dict:
    params = [{"name": name, "in": "path", "required": True,
               "schema": {"type": "integer"} if kind == "int" else STR}
              for name, kind in re.findall(r"\{(\w+):(\w+)\}", path)]
    if path == "/api/search":
        params += SEARCH
    elif path.endswith("/search"):
        params += PAGING
    elif path == "/api/folders" and method == "get":
        params += [q("parentUid"), q("limit"), q("page")]
    out: dict[str, Any] = {"parameters": params, "responses": GRAFANA}
    if method in ("post", "put", "patch"):
        out["requestBody"] = JSON_BODY
    return out


def schema(app: Any) -> dict:
    """The OpenAPI 3.0 document of `app`: the table above, the Loki-named aliases of its
    paths, and Grafana's API from the routes themselves (their parameters are in the path
    or listed in _grafana_op)."""
    paths: dict[str, Any] = {}
    for route in app.routes:
        path = route.path
        spec_path = re.sub(r"\{(\w+):\w+\}", r"{\1}", path)
        canonical = logstore_path(spec_path)
        if canonical in PATHS:
            paths[spec_path] = _with_path_params(PATHS[canonical], spec_path)
        elif path.startswith("/api/"):
            methods = sorted(m.lower() for m in route.methods if m not in ("OPTIONS", "HEAD"))
            paths[spec_path] = {m: _grafana_op(m, path) for m in methods}
    prefix = app.state.services.config.server.http_path_prefix
    # under server.http_path_prefix the paths below are relative to it
    servers = {"servers": [{"url": prefix}]} if prefix else {}
    return {"openapi": "3.0.3", **servers,
            "info": {"title": "logstore", "version": "1",
                     "description": "Loki's HTTP API (paths /logstore, /compat, /api/compat "
                                    "and Loki's own names) and Grafana's folder and dashboard "
                                    "API over one SQLite file."},
            "paths": dict(sorted(paths.items()))}


def _with_path_params(ops: dict, path: str) -> dict:
    names = re.findall(r"\{(\w+)\}", path)
    if not names:
        return ops
    out = {}
    for method, operation in ops.items():
        operation = dict(operation)
        operation["parameters"] = [{"name": n, "in": "path", "required": True,
                                    "schema": {"type": "string", "minLength": 1}}
                                   for n in names] + operation["parameters"]
        out[method] = operation
    return out


@get("/openapi.json")
async def openapi(request: Request) -> Response:
    return Response(content=schema(request.app), media_type=JSON)


handlers = [openapi]
