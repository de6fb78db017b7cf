"""Every HTTP request timed for /metrics, under the route name Loki would give it.

Wraps the whole app (the router included), so a request no route matched is counted too,
as `other`; and it is where reads are made cancellable when their client goes away
(routes/cancel.py), since both need the final status."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from routes.cancel import CLIENT_CLOSED, cancellable, run_until_disconnect
from routes.paths import route_label

# a client may send any token as its method: those outside HTTP's own are one label value, as
# unknown paths are, so they cannot grow the series count
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT",
                     "TRACE"})

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Receive, Scope, Send

    from services.runtime.metrics import Metrics


def timed(app: ASGIApp, metrics: Metrics) -> ASGIApp:
    observe = metrics.requests.observe
    perf_counter = time.perf_counter

    async def timing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = perf_counter()
        status = 500

        async def capture(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if not cancellable(scope):
                await app(scope, receive, capture)
            elif await run_until_disconnect(app, scope, receive, capture):
                status = CLIENT_CLOSED
        finally:
            method = scope["method"]
            observe(route_label(scope), method if method in METHODS else "other", status,
                    perf_counter() - started)
    return timing
