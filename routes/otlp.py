"""`POST /otlp/v1/logs`: OTLP/HTTP logs, protobuf or OTLP/JSON (http-api.md §3).

Errors are a serialised `google.rpc.Status` whose message is the text a push would give;
500 becomes 503 so that exporters retry.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import msgspec
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from litestar import Request, Response, post
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from routes.errors import PlainError
from routes.push import decode_content_encoding, read_body
from routes.deps import Ctx
from services.otlp import OtlpError, OtlpMapper, hex_ids_to_base64

log = logging.getLogger("logstore.otlp")
ENCODINGS = ("gzip", "zstd", "lz4")
PROTOBUF, JSON = "application/x-protobuf", "application/json"


def status_response(status: int, message: str) -> Response:
    status = 503 if status == 500 else status
    body = status_pb2.Status(message=message).SerializeToString()
    return Response(content=body, status_code=status, media_type="application/octet-stream")


def _decode(body: bytes, media: str) -> Any:
    if media == PROTOBUF:
        try:
            return ExportLogsServiceRequest.FromString(body)
        except DecodeError as exc:
            raise OtlpError(f"failed to unmarshal request: {exc}") from None
    try:
        document = hex_ids_to_base64(msgspec.json.decode(body)) if body.strip() else {}
        return json_format.ParseDict(document, ExportLogsServiceRequest(),
                                     ignore_unknown_fields=True)
    except (msgspec.DecodeError, json_format.ParseError) as exc:
        raise OtlpError(f"failed to unmarshal request: {exc}") from None


def _mapper(ctx: Ctx) -> OtlpMapper:
    mapper = ctx.extras.get("otlp_mapper")
    if mapper is None:
        mapper = ctx.extras["otlp_mapper"] = OtlpMapper(ctx.config.limits_config.otlp_config)
    return mapper


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
        with ctx.extras["inflight_bytes"].hold() as hold:
            body = await read_body(request, limits.max_recv_msg_size, hold)
            body = decode_content_encoding(body, encoding, limits.max_decompressed_size, hold,
                                           ENCODINGS)
            streams = _mapper(ctx).streams(_decode(body, media))
            outcome = await ctx.ingester.push(tenant, streams)
    except OtlpError as exc:
        return status_response(400, str(exc))
    except PlainError as exc:  # push's errors (PushError) included
        return status_response(exc.status, exc.message)
    except Exception as exc:  # noqa: BLE001 - exporters retry on 503, not on 500
        log.exception("OTLP push failed")
        return status_response(503, f"{type(exc).__name__}: {exc}")
    ctx.metrics.observe_push(tenant, outcome.accepted_lines, outcome.accepted_bytes,
                             time.perf_counter() - started)
    message = outcome.error_body()
    if message:
        return status_response(400, message)
    return Response(content=b"", status_code=204)


handlers: list[Any] = [otlp_logs]
