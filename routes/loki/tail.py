"""`GET /logstore/api/v1/tail` and the legacy `GET /api/compat/tail` (WebSocket, http-api.md §8).

Parameters are checked before the upgrade: a bad one is answered with HTTP 400 and Loki's
plain-text message (through the ASGI `websocket.http.response` extension, which granian
offers). After the upgrade: a metric query is closed with 1011 `only log selector is
supported`; otherwise the last `limit` matching entries since `start` are sent oldest first,
then live entries as pushes commit (services/read/tail.py). A client close ends the session;
errors after the upgrade close with 1011 and the error text.

A browser cannot set `X-Scope-OrgID` on a WebSocket, so with `auth_enabled` the tail also
takes the tenant from a subprotocol the client offers, `logstore.tenant.<org id as unpadded
base64url>` (base64, because `'()|` are allowed in an org id but not in a subprotocol token),
and echoes it as the accepted subprotocol, without which a browser drops the connection.
`Sec-WebSocket-Protocol` is the one header a page may set on a WebSocket: like
`X-Scope-OrgID` it is named per connection, where a cookie would ride along implicitly and a
query parameter would land in URLs and access logs and differ from every other Loki route.
The header wins over the subprotocol, so a proxy that sets `X-Scope-OrgID` from its own
authentication still decides the tenant; the org id of either passes the same checks
(Services.tenant). An org id is not a credential, in Loki as here.

ASGI gives an application no way to send WebSocket ping frames, so the one-second ping of
Loki is not sent; a vanished client is noticed through its closed connection instead.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import time
from typing import Any
from urllib.parse import parse_qsl

import msgspec
from litestar import Request, Response, WebSocket, get, websocket
from litestar.exceptions import WebSocketDisconnect

from logql import ParseError, parse_expr
from logql.syntax import ast as A
from logql.plan import compile_log_query
from logql.gocompat.filters import PipelineError
from routes.params import NS, Params, int_param, timestamp_param
from routes.deps import Ctx
from services.runtime.errors import PlainError
from services.read.tail import MAX_TAIL_SECONDS, Tailer, TooManyTails

log = logging.getLogger("logstore.tail")

MAX_DELAY_SECONDS = 5
CATEGORIZE = "categorize-labels"
_encode = msgspec.json.Encoder().encode


class _TailRequest:
    def __init__(self, tenant: str, query: A.LogQuery | None, limit: int, start: int,
                 delay: int, categorize: bool):
        self.tenant, self.query, self.limit, self.start = tenant, query, limit, start
        self.delay, self.categorize = delay, categorize


TENANT_PROTOCOL = "logstore.tenant."


def tenant_protocol(scope: dict) -> tuple[str | None, str]:
    """The `logstore.tenant.` subprotocol a client offers (to echo it) and the org id it
    names; (None, "") without one. One that is not base64url of UTF-8 text is refused."""
    offers = [p.strip() for name, value in scope.get("headers", [])
              if name.lower() == b"sec-websocket-protocol"
              for p in value.decode("latin-1").split(",")]
    protocol = next((p for p in offers if p.startswith(TENANT_PROTOCOL)), None)
    if protocol is None:
        return None, ""
    encoded = protocol[len(TENANT_PROTOCOL):]
    try:
        if not re.fullmatch(r"[A-Za-z0-9_-]*", encoded):
            raise ValueError
        org = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise PlainError(400, f"subprotocol {protocol!r} is not {TENANT_PROTOCOL}"
                              "<org id as unpadded base64url>") from None
    return protocol, org


def _read_request(socket: WebSocket, ctx: Ctx, legacy: bool) -> _TailRequest:
    """Every check Loki makes before the upgrade, in its order; PlainError(400) on failure."""
    _, offered = tenant_protocol(socket.scope)  # type: ignore[arg-type]
    tenant = ctx.tenant(socket, offered=offered)  # type: ignore[arg-type] - reads the headers
    params = Params(parse_qsl(socket.scope.get("query_string", b"").decode("utf-8", "replace"),
                              keep_blank_values=True))
    text = params.get("query") or ""
    if legacy and params.get("regexp"):
        text += " |~ " + msgspec.json.encode(params.get("regexp")).decode()
    try:
        expr = parse_expr(text)
    except ParseError as exc:
        raise PlainError(400, str(exc)) from None
    limit = int_param(params, "limit", 100)
    if limit <= 0:
        raise PlainError(400, "limit must be a positive value")
    ctx.querier.check_entries_limit(tenant, limit)
    start = timestamp_param(params, "start", time.time_ns() - 3600 * NS)
    delay = int_param(params, "delay_for", 0)
    if delay > MAX_DELAY_SECONDS:
        raise PlainError(400, f"delay_for can't be greater than {MAX_DELAY_SECONDS}")
    query = expr if isinstance(expr, A.LogQuery) else None
    if query is not None:
        try:
            compile_log_query(query)
        except PipelineError as exc:
            raise PlainError(400, str(exc)) from None
    flags = socket.headers.get("x-loki-response-encoding-flags", "")
    categorize = not legacy and CATEGORIZE in [f.strip() for f in flags.split(",")]
    return _TailRequest(tenant, query, limit, start, max(delay, 0), categorize)


async def _deny(socket: WebSocket, status: int, message: str) -> None:
    """Refuse the upgrade with an HTTP response (or, without server support, a close)."""
    await socket.receive()  # websocket.connect
    if "websocket.http.response" in (socket.scope.get("extensions") or {}):
        await socket.send({"type": "websocket.http.response.start", "status": status,
                           "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
        await socket.send({"type": "websocket.http.response.body",
                           "body": message.encode("utf-8")})
    else:
        await socket.send({"type": "websocket.close", "code": 1008,
                           "reason": message.encode()[:123].decode("utf-8", "ignore")})


async def _serve(socket: WebSocket, ctx: Ctx, legacy: bool) -> None:
    try:
        req = _read_request(socket, ctx, legacy)
    except PlainError as exc:
        await _deny(socket, exc.status, exc.message)
        return
    protocol, _ = tenant_protocol(socket.scope)  # type: ignore[arg-type]
    await socket.accept(subprotocols=protocol)
    if req.query is None:
        await _close(socket, 1011, "only log selector is supported")
        return
    hub = ctx.tail_hub
    tailer = Tailer(req.tenant, compile_log_query(req.query), categorize=req.categorize,
                    legacy=legacy, delay_seconds=float(req.delay))
    try:
        hub.add(tailer)  # before the history query: nothing committed in between is missed
    except TooManyTails as exc:
        await _close(socket, 1011, str(exc))
        return
    try:
        await _run(socket, ctx, req, tailer)
    finally:
        hub.remove(tailer)


async def _run(socket: WebSocket, ctx: Ctx, req: _TailRequest, tailer: Tailer) -> None:
    try:
        history = await ctx.querier.history(req.tenant, req.query, req.start, time.time_ns(),
                                            req.limit, req.categorize)
    except Exception as exc:  # noqa: BLE001 - reported to the client as Loki does
        await _close(socket, 1011, str(exc))
        return
    for frame in tailer.frames(tailer.remember_history(history)):
        await socket.send_text(_encode(frame).decode())

    async def send_live() -> str | None:
        while True:
            frames = await tailer.next_frames()
            if frames is None:
                return "server is shutting down"
            for frame in frames:
                await socket.send_text(_encode(frame).decode())

    async def watch_client() -> None:
        try:
            while True:
                message = await socket.receive()
                if message["type"] == "websocket.disconnect":
                    return
        except WebSocketDisconnect:
            return

    sender = asyncio.ensure_future(send_live())
    watcher = asyncio.ensure_future(watch_client())
    try:
        done, _ = await asyncio.wait({sender, watcher}, timeout=MAX_TAIL_SECONDS,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sender, watcher):
            task.cancel()
        await asyncio.gather(sender, watcher, return_exceptions=True)
    if watcher in done:
        return  # the client went away or closed
    if not done:
        await _close(socket, 1011, "reached tail max duration limit")
        return
    exc = sender.exception()
    if exc is None:
        await _close(socket, 1001, sender.result() or "")
    elif not isinstance(exc, WebSocketDisconnect):
        log.warning("tail ended: %s", exc)
        await _close(socket, 1011, str(exc))


async def _close(socket: WebSocket, code: int, reason: str) -> None:
    try:
        # a close frame carries at most 123 bytes of reason
        await socket.close(code=code, reason=reason.encode()[:123].decode("utf-8", "ignore"))
    except Exception:  # noqa: BLE001 - the connection may already be gone
        pass


# gorilla/websocket's answer to a request without the upgrade (after Loki's own checks)
NOT_UPGRADED = "Bad Request\n"


async def _plain_http(request: Request, ctx: Ctx, legacy: bool) -> Response:
    """The tail path asked over plain HTTP: Loki checks the request first (400 with its
    error text), then its WebSocket upgrader refuses the missing upgrade."""
    _read_request(request, ctx, legacy)  # type: ignore[arg-type] - reads headers and scope
    return Response(NOT_UPGRADED, status_code=400, media_type="text/plain",
                    headers={"Sec-Websocket-Version": "13", "X-Content-Type-Options": "nosniff"})


@get("/logstore/api/v1/tail")
async def tail_over_http(request: Request, ctx: Ctx) -> Response:
    return await _plain_http(request, ctx, legacy=False)


@get("/api/compat/tail")
async def legacy_tail_over_http(request: Request, ctx: Ctx) -> Response:
    return await _plain_http(request, ctx, legacy=True)


@websocket("/logstore/api/v1/tail")
async def tail(socket: WebSocket, ctx: Ctx) -> None:
    await _serve(socket, ctx, legacy=False)


@websocket("/api/compat/tail")
async def legacy_tail(socket: WebSocket, ctx: Ctx) -> None:
    await _serve(socket, ctx, legacy=True)


handlers: list[Any] = [tail, legacy_tail, tail_over_http, legacy_tail_over_http]
