"""Plain-text errors with Loki's status codes and texts."""

from __future__ import annotations

from litestar import Request, Response
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException

from services.errors import PlainError

PLAIN = "text/plain"  # Litestar appends "; charset=utf-8"


__all__ = ["PlainError", "EXCEPTION_HANDLERS", "plain_response", "PLAIN"]


def plain_response(status: int, message: str, *, newline: bool = False) -> Response:
    headers = {"X-Content-Type-Options": "nosniff"} if newline else {}
    return Response(content=message + ("\n" if newline else ""), status_code=status,
                    media_type=PLAIN, headers=headers)


def handle_plain_error(_: Request, exc: PlainError) -> Response:
    return plain_response(exc.status, exc.message, newline=exc.newline)


def handle_not_found(_: Request, __: NotFoundException) -> Response:
    return Response(content="404 page not found\n", status_code=404, media_type=PLAIN)


def handle_method_not_allowed(_: Request, exc: MethodNotAllowedException) -> Response:
    return Response(content="Method Not Allowed\n", status_code=405, media_type=PLAIN,
                    headers=exc.headers or {})


def handle_http_exception(_: Request, exc: HTTPException) -> Response:
    return plain_response(exc.status_code, str(exc.detail))


EXCEPTION_HANDLERS = {
    PlainError: handle_plain_error,
    NotFoundException: handle_not_found,
    MethodNotAllowedException: handle_method_not_allowed,
}
