"""`POST /otlp/v1/logs`: OTLP/HTTP logs, protobuf or OTLP/JSON (http-api.md §3).

Errors are a serialised `google.rpc.Status` whose message is the text a push would give.
503 (which exporters retry) is kept for what passes: shutting down, a full disk, too many
push bytes in flight; a body that cannot be read is the client's 400, and an unexpected
failure is 500 with a request id, as on every other route.
"""

from __future__ import annotations

import time
from typing import Any

from google.rpc import status_pb2
from litestar import Request, Response, post

from routes.errors import PlainError, internal_error_text, log_internal_error
from routes.loki.push import read_body
from services.ingest.decode import decode_content_encoding
from routes.deps import Ctx
from services.runtime.errors import DiskFull
from services.ingest.otlp import JSON, PROTOBUF, OtlpError

ENCODINGS = ("gzip", "zstd", "lz4")


def status_response(status: int, message: str) -> Response:
    body = status_pb2.Status(message=message).SerializeToString()
    return Response(content=body, status_code=status, media_type="application/octet-stream")


@post("/otlp/v1/logs")
async def otlp_logs(request: Request, ctx: Ctx) -> Response:
    started = time.perf_counter()
    try:
        tenant = ctx.tenant(request)
        content_type = request.headers.get("content-type", "")
        # logstore compares the media type only: Loki's exact comparison refuses
        # `application/json; charset=utf-8`, which some exporters send
        media = content_type.split(";")[0].strip().lower()
        if media not in (PROTOBUF, JSON):
            raise PlainError(400, f"content type: {content_type} is not supported")
        encoding = request.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", *ENCODINGS):
            raise PlainError(400, f"unsupported content encoding {encoding}: only gzip, lz4 "
                                  "and zstd are supported")
        limits = ctx.config.distributor
        with ctx.inflight_bytes.hold() as hold:
            body = await read_body(request, limits.max_recv_msg_size, hold)
            body = decode_content_encoding(body, encoding, limits.max_decompressed_size, hold,
                                           ENCODINGS)
            outcome = await ctx.ingester.push_body(tenant, media, body,
                                                   limits.max_decompressed_size, hold,
                                                   otlp=ctx.otlp_mappers.of(tenant))
    except OtlpError as exc:
        return status_response(400, str(exc))
    except PlainError as exc:  # push's errors (PushError) included
        return status_response(exc.status, exc.message)
    except DiskFull as exc:  # exporters retry on 503: the write may pass once there is room
        return status_response(503, str(exc))
    except Exception as exc:  # noqa: BLE001 - answered as an OTLP Status, logged once
        return status_response(500, internal_error_text(log_internal_error(request, exc)))
    ctx.metrics.observe_push(tenant, outcome.accepted_lines, outcome.accepted_bytes,
                             time.perf_counter() - started)
    message = outcome.error_body()
    if message:
        return status_response(400, message)
    return Response(content=b"", status_code=204)


handlers: list[Any] = [otlp_logs]
