"""A response to a request whose body was not read to the end closes the connection.

A 404, a 405, a 413 decided from Content-Length or a refused login answer without reading
what the client sent. On a kept-alive HTTP/1.1 connection the rest of that body still
stands between the response and the client's next request, and the server then drops the
connection: a client that sent its next request meanwhile gets no response at all
("Server disconnected without sending a response"). Go's net/http, which Loki runs on, says
`Connection: close` on such a response, so that the client opens a new connection instead;
this wrapper does the same for every route, the router's own 404s included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Receive, Scope, Send

CLOSE = (b"connection", b"close")


def _has_body(scope: Any) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
        if name == b"transfer-encoding":
            return True
    return False


def close_if_body_unread(app: ASGIApp) -> ASGIApp:
    async def closing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await app(scope, receive, send)
            return
        body_done = False

        async def tracked_receive() -> Any:
            nonlocal body_done
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def closing_send(message: Any) -> None:
            if message["type"] == "http.response.start" and not body_done:
                message = {**message, "headers": [*message.get("headers", ()), CLOSE]}
            await send(message)

        await app(scope, tracked_receive, closing_send)
    return closing
