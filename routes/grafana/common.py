"""Helpers shared by the Grafana route modules: JSON responses, bounded JSON bodies decoded
into msgspec Structs."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException

from logql import depth
from litestar.di import NamedDependency

from services.grafana.common import Caller, GrafanaError, bad_request

JSON = "application/json"
MAX_BODY = 32 << 20  # a dashboard model is JSON; 32 MiB is far above any real one
T = TypeVar("T")
_encode = msgspec.json.Encoder().encode


def ok(data: Any, status: int = 200) -> Response:
    return Response(content=_encode(data), status_code=status, media_type=JSON)


async def body_of(request: Request, kind: type[T]) -> T:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise GrafanaError(413, f"request body too large: max {MAX_BODY} bytes")
        chunks.append(chunk)
    body = b"".join(chunks) or b"null"
    try:
        # measured before decoding: a dashboard model is kept as it came, and msgspec,
        # the stored copy's json.loads and every later encode recurse through it
        depth.check_json(body)
        return msgspec.json.decode(body, type=kind)
    except depth.TooDeep as exc:
        raise bad_request(f"bad request data: {exc}") from None
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise bad_request() from None


def handle_grafana_error(_: Request, exc: GrafanaError) -> Response:
    return ok(exc.body(), exc.status)


def handle_http_exception(_: Request, exc: HTTPException) -> Response:
    return ok({"message": str(exc.detail)}, exc.status_code)


# handlers declare `caller: CallerDep`: the authenticated caller, resolved by name
CallerDep = NamedDependency[Caller]
