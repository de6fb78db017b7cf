"""The log deletion API (spec/http-api.md section 14): thin handlers over services/upkeep/deletes.py."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get, post, route

from routes.deps import Ctx
from routes.params import read_params
from routes.respond import json_response

PATH = "/logstore/api/v1/delete"


@route(PATH, http_method=["POST", "PUT"])
async def create_delete(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.tenant(request)
    # URL query parameters, not a form body (as Loki)
    params = {k: v for k, v in request.query_params.items()}
    request_id = await ctx.deletions.add(tenant, params)
    return Response(b"", status_code=204, headers={"X-Delete-Request-ID": request_id})


@get(PATH)
async def list_deletes(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.tenant(request)
    items = await ctx.deletions.list(tenant, await read_params(request))
    return json_response(items)


@route(PATH, http_method=["DELETE"], status_code=200)
async def cancel_delete(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.tenant(request)
    await ctx.deletions.cancel(tenant, dict(request.query_params.items()))
    return Response(b"", status_code=204)


@get("/logstore/api/v1/cache/generation_numbers")
async def generation_numbers(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.tenant(request)
    return json_response(str(await ctx.deletions.generation(tenant)))


@post("/logstore/api/v1/cache/generation_numbers/increase")
async def increase_generation(request: Request, ctx: Ctx) -> Response:
    tenant = ctx.tenant(request)
    await ctx.deletions.increase_generation(tenant)
    return Response(b"", status_code=204)


handlers: list[Any] = [create_delete, list_deletes, cancel_delete, generation_numbers,
                       increase_generation]
