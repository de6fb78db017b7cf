"""Label names, label values and series."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, route
from litestar.params import FromPath

from routes.errors import PlainError
from routes.params import read_params, time_range
from routes.respond import json_response
from routes.deps import Ctx
from services.read.selectors import parse_matchers


async def label_data(request: Request, ctx: Ctx, name: str | None) -> list[str]:
    """Label names (`name` None) or the values of label `name`, for the request's range."""
    tenant = ctx.read_scope(request)
    params = await read_params(request)
    start, end = time_range(params)
    query = params.get("query")
    matchers = parse_matchers(query) if query else None
    if name is None:
        return await ctx.querier.label_names(tenant, start, end, matchers)
    return await ctx.querier.label_values(tenant, name, start, end, matchers)


async def series_data(request: Request, ctx: Ctx) -> msgspec.Raw:
    """The `data` of a /series answer: the label sets' JSON texts as one array."""
    tenant = ctx.read_scope(request)
    params = await read_params(request)
    start, end = time_range(params)
    texts = list(dict.fromkeys(params.getall("match[]") + params.getall("match")))
    if not texts:
        raise PlainError(400, "at least one match[] parameter is required: "
                              'for example match[]={app="api"}')
    groups = [parse_matchers(text, require_non_empty=False) for text in texts]
    found = await ctx.querier.series(tenant, groups, start, end)
    return msgspec.Raw(("[" + ",".join(found) + "]").encode())


@route(["/logstore/api/v1/labels", "/logstore/api/v1/label"], http_method=["GET", "POST"])
async def labels(request: Request, ctx: Ctx) -> Response:
    return json_response({"status": "success", "data": await label_data(request, ctx, None)})


@route("/logstore/api/v1/label/{name:str}/values", http_method=["GET", "POST"])
async def label_values(request: Request, ctx: Ctx, name: FromPath[str]) -> Response:
    return json_response({"status": "success", "data": await label_data(request, ctx, name)})


@route("/logstore/api/v1/series", http_method=["GET", "POST"])
async def series(request: Request, ctx: Ctx) -> Response:
    return json_response({"status": "success", "data": await series_data(request, ctx)})


handlers: list[Any] = [labels, label_values, series]
