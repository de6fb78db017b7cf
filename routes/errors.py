"""Plain-text errors with Loki's status codes and texts."""

from __future__ import annotations

import logging
import secrets

from litestar import Request, Response
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException

from logql.depth import TooDeep
from logql.errors import ParseError, QueryError, QueryTimeout, StoreUnavailable
from services.read.query_gate import TooManyOutstanding
from routes.respond import json_response
from services.runtime.errors import DiskFull, JSONError, PlainError

PLAIN = "text/plain"  # Litestar appends "; charset=utf-8"
NOT_FOUND_TEXT = "404 page not found\n"  # Go's http.NotFound, as Loki answers
log = logging.getLogger("logstore.http")


__all__ = ["PlainError", "EXCEPTION_HANDLERS", "plain_response", "PLAIN", "TIMEOUT_TEXT",
           "INTERNAL_ERROR", "log_internal_error"]

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


def handle_store_unavailable(_: Request, exc: StoreUnavailable) -> Response:
    """The log store (ClickHouse) could not answer: 503, so clients and load balancers
    retry, with what it said."""
    return plain_response(503, f"the log store is unavailable: {exc}", newline=True)


def handle_query_error(_: Request, exc: ParseError | QueryError) -> Response:
    """LogQL that does not parse, or cannot be evaluated as asked: 400 with the text."""
    return plain_response(400, str(exc))


def handle_timeout(_: Request, __: QueryTimeout) -> Response:
    return plain_response(504, TIMEOUT_TEXT)


def handle_too_many_outstanding(_: Request, exc: TooManyOutstanding) -> Response:
    return plain_response(429, str(exc))


def handle_not_found(_: Request, __: NotFoundException) -> Response:
    return Response(content=NOT_FOUND_TEXT, status_code=404, media_type=PLAIN)


def handle_method_not_allowed(_: Request, exc: MethodNotAllowedException) -> Response:
    return Response(content="Method Not Allowed\n", status_code=405, media_type=PLAIN,
                    headers=exc.headers or {})


def handle_http_exception(_: Request, exc: HTTPException) -> Response:
    return plain_response(exc.status_code, str(exc.detail))


def handle_too_deep(_: Request, exc: TooDeep) -> Response:
    """Input nested past its bound (logql/depth.py), wherever it was measured."""
    return plain_response(400, str(exc))


INTERNAL_ERROR = "Internal Server Error"  # Go's http.StatusText(500), what Loki answers


def log_internal_error(request: Request, exc: BaseException) -> str:
    """Log an unexpected failure with its traceback under a new request id, and return the
    id: the answer names it, so a client's report leads to this log line. Every handler of
    unexpected errors (Loki's routes here, Grafana's /api, OTLP) goes through this."""
    request_id = secrets.token_hex(8)
    services = request.app.state.get("services")   # absent in an app built without them
    if services is not None:
        services.metrics.internal_errors += 1
    log.error("internal error serving %s %s (request id %s)", request.method,
              request.url.path, request_id, exc_info=exc)
    return request_id


def internal_error_text(request_id: str) -> str:
    return f"{INTERNAL_ERROR} (request id {request_id})"


def handle_internal_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected: 500 with Loki's text and the request id, never the exception's
    text or traceback (they can hold a client's input, or paths and internals)."""
    request_id = log_internal_error(request, exc)
    return Response(content=internal_error_text(request_id) + "\n", status_code=500,
                    media_type=PLAIN, headers={"X-Request-Id": request_id})


EXCEPTION_HANDLERS = {
    PlainError: handle_plain_error,
    JSONError: handle_json_error,
    DiskFull: handle_disk_full,
    StoreUnavailable: handle_store_unavailable,
    ParseError: handle_query_error,
    QueryError: handle_query_error,
    QueryTimeout: handle_timeout,
    TooManyOutstanding: handle_too_many_outstanding,
    TooDeep: handle_too_deep,
    NotFoundException: handle_not_found,
    MethodNotAllowedException: handle_method_not_allowed,
    HTTPException: handle_http_exception,
    Exception: handle_internal_error,
}
