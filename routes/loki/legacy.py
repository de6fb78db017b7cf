"""The deprecated `/api/compat/*` read endpoints with their old response shapes (§15).

`/api/compat/push` lives with the push routes and `/api/compat/tail` with the tail routes;
Loki's names (`/api/prom/*`) are added as aliases like every other route.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, route
from litestar.params import FromPath

from logql.syntax import ast as A
from logql.gocompat.format import go_quote
from logql.engine.results import stats_json
from routes.errors import PlainError
from routes.loki.meta import label_data, series_data
from routes.params import read_params, time_range
from routes.loki.query import direction_param, limit_param, parse_query, run_query
from routes.respond import json_response
from routes.deps import Ctx
from services.ingest.prepare import rfc3339
from logql.model import canonical_labels

NOT_STREAMS = "legacy endpoints only support streams result type"


def legacy_streams(result: list[dict]) -> list[dict]:
    """v1 `streams` (labels merged as in a v1 answer without categorize-labels) in the old
    shape: the label set as Loki's label string, entries with RFC 3339 timestamps."""
    return [{"labels": canonical_labels(stream["stream"]),
             "entries": [{"ts": rfc3339(int(ts)), "line": line}
                         for ts, line, *_ in stream["values"]]}
            for stream in result]


@route("/api/compat/query", http_method=["GET", "POST"])
async def legacy_query(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.read_scope(request)
    params = await read_params(request)
    start, end = time_range(params)
    limit = limit_param(params)
    backward = direction_param(params)
    text = params.get("query") or ""
    regexp = params.get("regexp")
    if regexp:
        text = f"{text} |~ {go_quote(regexp)}"
    expr = parse_query(text)
    if not isinstance(expr, A.LogQuery):
        raise PlainError(400, NOT_STREAMS)
    ctx.querier.check_entries_limit(tenant, limit)
    _, result, stats = await run_query(ctx, request, expr, start=start, end=end, limit=limit,
                                       backward=backward, interval=0, step=0, instant=False,
                                       categorize=False)
    return json_response({"streams": legacy_streams(result), "stats": stats_json(stats)})


def _values(names: list[str]) -> Response:
    # Go's `omitempty`: no key at all when there is nothing
    return json_response({"values": names} if names else {})


@route("/api/compat/label", http_method=["GET", "POST"])
async def legacy_labels(request: Request, ctx: Ctx) -> Response:
    return _values(await label_data(request, ctx, None))


@route("/api/compat/label/{name:str}/values", http_method=["GET", "POST"])
async def legacy_label_values(request: Request, ctx: Ctx, name: FromPath[str]) -> Response:
    # logstore answers the values of <name>; Loki answers label names here (a routing bug)
    return _values(await label_data(request, ctx, name))


@route("/api/compat/series", http_method=["GET", "POST"])
async def legacy_series(request: Request, ctx: Ctx) -> Response:
    return json_response({"status": "success", "data": await series_data(request, ctx)})


handlers: list[Any] = [legacy_query, legacy_labels, legacy_label_values, legacy_series]
