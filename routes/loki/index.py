"""Index stats and log volume (spec/http-api.md section 6): thin handlers over the query
service. Selectors only: a pipeline answers 400 `only label matchers are supported`, as
Loki's index endpoints parse their query."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, route

from routes.deps import Ctx
from routes.errors import PlainError
from routes.params import Params, int_param, read_params, time_range
from routes.loki.query import step_of
from routes.respond import json_response
from services.read.selectors import parse_matchers
from services.read.volume import VolumeLimitError, VolumeRequest

DEFAULT_LIMIT = 100


async def _selector(request: Request, ctx: Ctx,
                    tenant: Any) -> tuple[Params, list, int, int]:
    params = await read_params(request)
    start, end = time_range(params)
    matchers = parse_matchers(params.get("query") or "")
    ctx.querier.check_length(tenant, start, end)
    return params, matchers, start, end


@route("/logstore/api/v1/index/stats", http_method=["GET", "POST"])
async def index_stats(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.read_scope(request)
    params, matchers, start, end = await _selector(request, ctx, tenant)
    step_of(params, start, end)  # validated as query_range validates it
    return json_response(await ctx.querier.index_stats(tenant, matchers, start, end))


def _limit(params: Params) -> int:
    value = int_param(params, "limit", DEFAULT_LIMIT)
    if value == 0:
        return DEFAULT_LIMIT
    if value < 0:
        raise PlainError(400, "limit must be a positive value")
    return value


async def _volume(request: Request, ctx: Ctx, ranged: bool) -> Response:
    tenant = ctx.read_scope(request)
    ctx.querier.check_volume_enabled(tenant)
    params, matchers, start, end = await _selector(request, ctx, tenant)
    limit = _limit(params)
    aggregate_by = params.get("aggregateBy") or "series"
    if aggregate_by not in ("series", "labels"):
        raise PlainError(400, "invalid aggregation option")
    step = step_of(params, start, end) if ranged else 0
    targets = [t for t in (params.get("targetLabels") or "").split(",") if t]
    req = VolumeRequest(matchers, start, end, step, limit, targets, aggregate_by)
    try:
        kind, result = await ctx.querier.volume(tenant, req)
    except VolumeLimitError as exc:
        raise PlainError(400, str(exc)) from None
    return json_response({"status": "success",
                          "data": {"resultType": kind, "result": result}})


@route("/logstore/api/v1/index/volume", http_method=["GET", "POST"])
async def index_volume(request: Request, ctx: Ctx) -> Response:
    return await _volume(request, ctx, ranged=False)


@route("/logstore/api/v1/index/volume_range", http_method=["GET", "POST"])
async def index_volume_range(request: Request, ctx: Ctx) -> Response:
    return await _volume(request, ctx, ranged=True)


handlers: list[Any] = [index_stats, index_volume, index_volume_range]
