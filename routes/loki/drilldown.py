"""Detected labels, detected fields and field values for Grafana's Logs Drilldown
(spec/http-api.md section 10): thin handlers over services/read/detected.py."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, route
from litestar.params import FromPath

from routes.deps import Ctx
from routes.errors import PlainError
from routes.params import Params, int_param, read_params, time_range
from routes.loki.query import parse_query, step_of
from routes.respond import json_response
from logql.syntax import ast as A
from services.read import detected
from services.read.selectors import parse_matchers

LINE_LIMIT = 100
FIELD_LIMIT = 1000


def _int(params: Params, names: tuple[str, ...], default: int) -> int:
    for name in names:
        if params.get(name):
            value = int_param(params, name, default)
            if value <= 0:
                raise PlainError(400, f"{name} must be a positive value")
            return value
    return default


@route("/logstore/api/v1/detected_labels", http_method=["GET", "POST"])
async def detected_labels(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.read_scope(request)
    params = await read_params(request)
    start, end = time_range(params)
    text = params.get("query")
    matchers = parse_matchers(text) if text else ()
    sets = await ctx.querier.label_sets(tenant, [matchers], start, end)
    return json_response({"detectedLabels": detected.detected_labels(sets)})


async def _entries(request: Request, ctx: Ctx) -> tuple[list, Params]:
    tenant = ctx.read_scope(request)
    params = await read_params(request)
    start, end = time_range(params)
    step_of(params, start, end)  # validated as Loki validates it
    expr = parse_query(params.get("query"))
    if not isinstance(expr, A.LogQuery):
        raise PlainError(400, "only log queries are supported")
    line_limit = _int(params, ("line_limit",), LINE_LIMIT)
    ctx.querier.check_entries_limit(tenant, line_limit)
    out = await ctx.querier.query(tenant, expr, start=start, end=end, limit=line_limit,
                                  backward=True, categorize=True)
    entries = []
    for stream in out.result:
        for value in stream["values"]:
            extra = value[2] if len(value) > 2 else {}
            entries.append((int(value[0]), stream["stream"], value[1],
                            extra.get("structuredMetadata", {}), extra.get("parsed", {})))
    entries.sort(key=lambda e: -e[0])
    return [e[1:] for e in entries], params


@route("/logstore/api/v1/detected_fields", http_method=["GET", "POST"])
async def detected_fields(request: Request, ctx: Ctx) -> Response:
    entries, params = await _entries(request, ctx)
    limit = _int(params, ("limit", "field_limit"), FIELD_LIMIT)
    fields = detected.fields_json(detected.detected_fields(entries, limit))
    return json_response({"fields": fields, "limit": limit} if fields else {"fields": []})


@route("/logstore/api/v1/detected_field/{name:str}/values", http_method=["GET", "POST"])
async def detected_field_values(request: Request, ctx: Ctx, name: FromPath[str]) -> Response:
    entries, params = await _entries(request, ctx)
    limit = _int(params, ("limit", "field_limit"), FIELD_LIMIT)
    values = detected.field_values(entries, name, limit)
    return json_response({"values": values, "limit": limit} if values else {"values": []})


@route("/logstore/api/v1/patterns", http_method=["GET", "POST"])
async def patterns(request: Request, ctx: Ctx) -> Response:
    service = ctx.patterns
    if not service.enabled:
        raise PlainError(404, "")  # Loki without its pattern ingester
    tenant = ctx.read_scope(request)
    params = await read_params(request)
    start, end = time_range(params)
    step = step_of(params, start, end)
    matchers = parse_matchers(params.get("query") or "")
    ids, hidden = await ctx.querier.stream_ids(tenant, matchers, start, end)
    data = await service.query(ids, start, end, step, hidden) if ids else []
    return json_response({"status": "success", "data": data})


handlers: list[Any] = [detected_labels, detected_fields, detected_field_values, patterns]
