"""POST /logstore/api/v1/push (JSON or snappy protobuf) and the legacy /api/compat/push.
Bodies are decoded by services/ingest/decode.py."""

from __future__ import annotations

import time
from typing import Any

from litestar import Request, Response, post

from routes.params import parse_timestamp
from routes.deps import Ctx
from services.runtime import memory
from services.ingest.inflight import Held
from services.ingest.prepare import PushError
from services.ingest.decode import JSON_MEDIA, decode_content_encoding, decode_legacy_json


async def read_body(request: Request, limit: int, hold: Held) -> bytes:
    """The raw body, each piece counted in `hold` as it arrives."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise PushError(413, "request body too large: message size too large than max "
                             f"({declared} vs {limit})")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PushError(413, "request body too large: message size too large than max "
                                 f"({size} vs {limit})")
        hold.add(len(chunk))
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _ingest(ctx: Ctx, tenant: str, body: bytes, media: str, legacy: bool,
                  limit: int, hold: Held) -> Any:
    # a PushError is answered as it is
    if legacy and media == JSON_MEDIA:
        return await ctx.ingester.push(tenant, decode_legacy_json(body, parse_timestamp))
    return await ctx.ingester.push_body(tenant, media, body, limit, hold)


async def _push(request: Request, ctx: Ctx, legacy: bool) -> Response:
    started = time.perf_counter()
    tenant = ctx.tenant(request, newline=True)
    limits = ctx.config.distributor
    ctype_header = request.headers.get("content-type")
    media = (ctype_header or "").split(";")[0].strip().lower()
    if not media or "/" not in media:
        raise PushError(400, "mime: no media type")
    with ctx.inflight_bytes.hold() as hold:
        body = decode_content_encoding(await read_body(request, limits.max_recv_msg_size, hold),
                                       request.headers.get("content-encoding", ""),
                                       limits.max_decompressed_size, hold)
        large = len(body) > memory.LARGE_BYTES
        try:
            outcome = await _ingest(ctx, tenant, body, media, legacy,
                                    limits.max_decompressed_size, hold)
        finally:
            del body
            if large:
                memory.trim_soon()  # the body and what was decoded from it are freed now
    ctx.metrics.observe_push(tenant, outcome.accepted_lines, outcome.accepted_bytes,
                             time.perf_counter() - started)
    message = outcome.error_body()
    if message:
        raise PushError(outcome.status, message)
    return Response(content=b"", status_code=204)


@post("/logstore/api/v1/push")
async def push(request: Request, ctx: Ctx) -> Response:
    return await _push(request, ctx, legacy=False)


@post("/api/compat/push")
async def legacy_push(request: Request, ctx: Ctx) -> Response:
    return await _push(request, ctx, legacy=True)


handlers: list[Any] = [push, legacy_push]
