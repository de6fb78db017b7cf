"""Plain-text errors with Loki's status codes and texts."""

from __future__ import annotations

import logging

from litestar import Request, Response
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException

from logql.errors import ParseError, QueryError, QueryTimeout
from services.query_gate import TooManyOutstanding
from routes.respond import json_response
from services.errors import DiskFull, JSONError, PlainError

PLAIN = "text/plain"  # Litestar appends "; charset=utf-8"
log = logging.getLogger("logstore.http")


__all__ = ["PlainError", "EXCEPTION_HANDLERS", "plain_response", "PLAIN", "TIMEOUT_TEXT"]

TIMEOUT_TEXT = ("request timed out, decrease the duration of the request or add more label "
                "matchers (prefer exact match over regex match) to reduce the amount of data "
                "processed")


def plain_response(status: int, message: str, *, newline: bool = False) -> Response:
    headers = {"X-Content-Type-Options": "nosniff"} if newline else {}
    return Response(content=message + ("\n" if newline else ""), status_code=status,
                    media_type=PLAIN, headers=headers)


def handle_plain_error(_: Request, exc: PlainError) -> Response:
    return plain_response(exc.status, exc.message, newline=exc.newline)


def handle_json_error(_: Request, exc: JSONError) -> Response:
    return json_response({"status": "error", "data": None, "errorType": exc.error_type,
                          "error": exc.message}, exc.status)


def handle_disk_full(_: Request, exc: DiskFull) -> Response:
    return plain_response(503, str(exc), newline=True)


def handle_query_error(_: Request, exc: ParseError | QueryError) -> Response:
    """LogQL that does not parse, or cannot be evaluated as asked: 400 with the text."""
    return plain_response(400, str(exc))


def handle_timeout(_: Request, __: QueryTimeout) -> Response:
    return plain_response(504, TIMEOUT_TEXT)


def handle_too_many_outstanding(_: Request, exc: TooManyOutstanding) -> Response:
    return plain_response(429, str(exc))


def handle_not_found(_: Request, __: NotFoundException) -> Response:
    return Response(content="404 page not found\n", status_code=404, media_type=PLAIN)


def handle_method_not_allowed(_: Request, exc: MethodNotAllowedException) -> Response:
    return Response(content="Method Not Allowed\n", status_code=405, media_type=PLAIN,
                    headers=exc.headers or {})


def handle_http_exception(_: Request, exc: HTTPException) -> Response:
    return plain_response(exc.status_code, str(exc.detail))


def handle_internal_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected: logged with its traceback, answered as Loki does (500, the error
    text), never with the traceback itself."""
    log.exception("internal error serving %s %s", request.method, request.url.path)
    return plain_response(500, f"{type(exc).__name__}: {exc}")


EXCEPTION_HANDLERS = {
    PlainError: handle_plain_error,
    JSONError: handle_json_error,
    DiskFull: handle_disk_full,
    ParseError: handle_query_error,
    QueryError: handle_query_error,
    QueryTimeout: handle_timeout,
    TooManyOutstanding: handle_too_many_outstanding,
    NotFoundException: handle_not_found,
    MethodNotAllowedException: handle_method_not_allowed,
    HTTPException: handle_http_exception,
    Exception: handle_internal_error,
}
