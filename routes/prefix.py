"""`server.http_path_prefix`: every route answers under the prefix, and only there.

Loki's server (dskit) hangs its whole router under `PathPrefix(prefix)`, so /metrics,
/ready, the push and query APIs and the tail WebSocket all move, and the unprefixed paths
are 404. Here one ASGI wrapper does the same in front of the router: it strips the prefix
from a matching request's path before routing (HTTP and WebSocket alike) and answers 404
itself for any other path. The routes themselves never know the prefix, so their path
templates, and with them the `route` label of /metrics, are the same with and without one.

The stripped path is not kept as ASGI's `root_path`: Litestar removes `root_path` from a path
by splitting on it anywhere in the string, which would cut `/logs` out of `/logstore/...`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from routes.errors import NOT_FOUND_TEXT

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Receive, Scope, Send


def under_prefix(app: ASGIApp, prefix: str) -> ASGIApp:
    """`app` answering only under `prefix` (normalised by config: `/a/b`, no trailing `/`)."""
    if not prefix:
        return app
    with_slash = prefix + "/"

    async def prefixed(scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        path = scope["path"]
        if path.startswith(with_slash):
            # in place: routes/timing.py reads the route template from this same scope
            scope["path"] = path[len(prefix):]
            raw = scope.get("raw_path")
            if raw is not None and raw.startswith(with_slash.encode()):
                scope["raw_path"] = raw[len(prefix):]
            await app(scope, receive, send)
        elif kind == "websocket":
            await _refuse_websocket(scope, send)
        elif path == prefix:
            # the page's URLs are relative: at `/logs` they would resolve against `/`
            query = scope.get("query_string", b"")
            target = with_slash + ("?" + query.decode("latin-1") if query else "")
            await _answer(send, 308, b"", [(b"location", target.encode("latin-1"))])
        else:
            await _answer(send, 404, NOT_FOUND_TEXT.encode(),
                          [(b"content-type", b"text/plain; charset=utf-8")])
    return prefixed


async def _answer(send: Any, status: int, body: bytes, headers: list) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _refuse_websocket(scope: Any, send: Any) -> None:
    """The 404 an HTTP request gets, where the server can send a response instead of the
    handshake (ASGI's websocket.http.response extension); else a refused handshake (403)."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    body = NOT_FOUND_TEXT.encode()
    await send({"type": "websocket.http.response.start", "status": 404,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "websocket.http.response.body", "body": body})
