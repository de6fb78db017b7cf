"""JSON responses as Loki sends them."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Response

JSON = "application/json; charset=UTF-8"
_encode = msgspec.json.Encoder().encode


def json_response(data: Any, status: int = 200) -> Response:
    return Response(content=_encode(data), status_code=status, media_type=JSON)
