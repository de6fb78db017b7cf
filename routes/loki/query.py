"""`/logstore/api/v1/query`, `/query_range` and `/format_query` (http-api.md §4, §9).

Thin: read and validate the parameters in Loki's order, parse the LogQL, hand it to the
query service (services/read/querier.py), encode the answer. Errors are typed and answered in
routes/errors.py.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import msgspec
from litestar import Request, Response, route

from logql import ParseError, format_query as pretty_query, parse_expr
from logql.syntax import ast as A
from logql.engine.logs import INSTANT_LOOKBACK_NS
from logql.engine.metrics import check_resolution, default_step_ns
from logql.gocompat.values import parse_go_duration
from logql.engine.results import QueryStats, stats_json
from routes.errors import PlainError
from routes.params import (Params, int_param, parse_timestamp, read_params, step_param,
                           time_range)
from routes.respond import json_response
from routes.deps import Ctx

log = logging.getLogger("logstore.query")

CATEGORIZE = "categorize-labels"


# -- parameters ------------------------------------------------------------------------------

def limit_param(params: Params) -> int:
    value = int_param(params, "limit", 100)
    if value <= 0:
        raise PlainError(400, "limit must be a positive value")
    return value


def direction_param(params: Params) -> bool:
    """True for backward (the default)."""
    text = params.get("direction")
    if not text:
        return True
    lowered = text.lower()
    if lowered == "backward":
        return True
    if lowered == "forward":
        return False
    raise PlainError(400, f"invalid direction '{text}'")


def step_of(params: Params, start: int, end: int) -> int:
    text = params.get("step")
    step = step_param(text) if text else default_step_ns(start, end)
    check_resolution(start, end, step)
    return step


def _interval(params: Params) -> int:
    text = params.get("interval")
    if not text:
        return 0
    value = step_param(text)
    if value < 0:
        raise PlainError(400, "interval must be >= 0")
    return value


def parse_query(text: str | None) -> Any:
    return parse_expr(text or "")  # a ParseError is answered 400 at the edge


def _empty(result_type: str) -> Response:
    return json_response({"status": "success", "data": {
        "resultType": result_type, "result": [], "stats": stats_json(QueryStats())}})


def _queue_header(request: Request) -> float:
    text = request.headers.get("x-query-queue-time")
    if not text:
        return 0.0
    try:
        return parse_go_duration(text) / 1e9
    except ValueError:
        return 0.0


def _categorize(request: Request) -> bool:
    flags = request.headers.get("x-loki-response-encoding-flags", "")
    return CATEGORIZE in (f.strip() for f in flags.split(","))


# -- evaluation ------------------------------------------------------------------------------

async def _evaluate(ctx: Ctx, request: Request, expr: Any, *, start: int, end: int,
                    limit: int, backward: bool, interval: int, step: int,
                    instant: bool) -> Response:
    categorize = _categorize(request)
    result_type, result, stats = await run_query(
        ctx, request, expr, start=start, end=end, limit=limit, backward=backward,
        interval=interval, step=step, instant=instant, categorize=categorize, encoded=True)
    data: dict[str, Any] = {"resultType": result_type}
    if categorize and result_type == "streams":
        data["encodingFlags"] = [CATEGORIZE]
    data["result"] = result
    data["stats"] = stats_json(stats)
    return json_response({"status": "success", "data": data})


async def run_query(ctx: Ctx, request: Request, expr: Any, *, start: int, end: int,
                    limit: int, backward: bool, interval: int, step: int, instant: bool,
                    categorize: bool, encoded: bool = False) -> tuple[str, Any, QueryStats]:
    """(resultType, result, stats) of a parsed query, from the query service (`encoded`: a
    log result may be its JSON text, msgspec.Raw, when the caller only encodes it)."""
    out = await ctx.querier.query(
        ctx.read_scope(request), expr, start=start, end=end, limit=limit, backward=backward,
        interval=interval, step=step, instant=instant, categorize=categorize,
        queue_time=_queue_header(request), encoded=encoded)
    return out.result_type, out.result, out.stats


# -- handlers --------------------------------------------------------------------------------

@route("/logstore/api/v1/query_range", http_method=["GET", "POST"])
async def query_range(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.read_scope(request)
    params = await read_params(request)
    start, end = time_range(params)
    limit = limit_param(params)
    backward = direction_param(params)
    step = step_of(params, start, end)
    interval = _interval(params)
    expr = parse_query(params.get("query"))
    if isinstance(expr, A.LogQuery):
        ctx.querier.check_entries_limit(tenant, limit)
    start = ctx.querier.lookback_start(tenant, start)
    if start > end:
        return _empty("streams" if isinstance(expr, A.LogQuery) else "matrix")
    ctx.querier.check_length(tenant, start, end)
    return await _evaluate(ctx, request, expr, start=start, end=end, limit=limit,
                           backward=backward, interval=interval, step=step, instant=False)


@route("/logstore/api/v1/query", http_method=["GET", "POST"])
async def query(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.read_scope(request)
    params = await read_params(request)
    text = params.get("time")
    if text:
        try:
            at = parse_timestamp(text)
        except ValueError as exc:
            raise PlainError(400, str(exc)) from None
    else:
        at = time.time_ns()
    limit = limit_param(params)
    backward = direction_param(params)
    expr = parse_query(params.get("query"))
    earliest = ctx.querier.lookback_start(tenant, at - INSTANT_LOOKBACK_NS)
    if isinstance(expr, A.LogQuery):
        ctx.querier.check_entries_limit(tenant, limit)
        if earliest > at:
            return _empty("streams")
        # a log query at one instant covers the lookback window up to and including `time`
        return await _evaluate(ctx, request, expr, start=earliest,
                               end=at + 1, limit=limit, backward=backward, interval=0,
                               step=0, instant=True)
    # a metric query is evaluated once, at `time`
    if earliest > at:
        return _empty("vector")
    return await _evaluate(ctx, request, expr, start=at, end=at, limit=limit,
                           backward=backward, interval=0, step=0, instant=True)


_FORMAT_ERROR = "application/json; charset=utf-8"


@route("/logstore/api/v1/format_query", http_method=["GET", "POST"])
async def format_query(request: Request) -> Response:
    params = await read_params(request)
    try:
        text = pretty_query(params.get("query") or "")
    except ParseError as exc:
        body = msgspec.json.encode({"status": "invalid-query", "error": str(exc)}) + b"\n"
        return Response(content=body, status_code=400, media_type=_FORMAT_ERROR)
    return json_response({"status": "success", "data": text})


handlers: list[Any] = [query_range, query, format_query]
