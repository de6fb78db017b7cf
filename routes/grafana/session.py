"""Grafana's session login for the web page: `POST /login` with `{"user", "password"}` sets
the `grafana_session` cookie (and the readable `grafana_csrf` one), `GET /logout` ends the
session; the Grafana API under /api then accepts the cookie where it accepts Basic auth
(services/grafana/sessions.py says how sessions and their CSRF tokens work)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.exceptions import HTTPException

from routes.deps import Ctx
from routes.grafana.common import body_of, handle_grafana_error, handle_http_exception, ok
from services.grafana import sessions
from services.grafana.common import Caller, GrafanaError


# Grafana's JSON errors, as under /api
_HANDLERS: dict = {GrafanaError: handle_grafana_error, HTTPException: handle_http_exception}


class LoginForm(msgspec.Struct):
    user: str = ""
    password: str = ""


def request_host(request: Request) -> str:
    """The host the client addressed: a proxy's X-Forwarded-Host, else Host."""
    forwarded = request.headers.get("x-forwarded-host")
    host = forwarded.split(",")[0] if forwarded else request.headers.get("host", "")
    return host.strip().lower()


def _over_https(request: Request) -> bool:
    proto = request.headers.get("x-forwarded-proto")
    if proto:
        return proto.split(",")[0].strip().lower() == "https"
    return request.scope.get("scheme") == "https"


def _cookies(request: Request, ctx: Ctx, token: str, csrf: str, max_age: int) -> list[Cookie]:
    # Path: the page and the API live under server.http_path_prefix; Strict: no other site's
    # page, link or form ever sends them
    path = ctx.config.server.http_path_prefix or "/"
    secure = _over_https(request)
    return [Cookie(key=sessions.COOKIE, value=token, path=path, max_age=max_age,
                   httponly=True, samesite="strict", secure=secure),
            Cookie(key=sessions.CSRF_COOKIE, value=csrf, path=path, max_age=max_age,
                   httponly=False, samesite="strict", secure=secure)]


async def cookie_caller(request: Request, ctx: Ctx) -> Caller | None:
    """The caller a session cookie proves when the request has no Authorization header,
    CSRF-checked; None when there is no cookie either."""
    if request.headers.get("authorization"):
        return None
    token = request.cookies.get(sessions.COOKIE)
    if not token:
        return None
    found = await ctx.grafana.session_caller(token, request.headers.get("x-grafana-org-id"))
    sessions.check_csrf(found, request.method, request.headers.get(sessions.CSRF_HEADER),
                        request.headers.get("origin"), request_host(request))
    return found.caller


@post(["/login", "/login/"], status_code=200, exception_handlers=_HANDLERS)
async def login(request: Request, ctx: Ctx) -> Response:
    origin = request.headers.get("origin")
    # a foreign page must not sign the browser in either (into the attacker's account)
    if origin is not None and sessions.origin_host(origin) != request_host(request):
        raise GrafanaError(403, sessions.ORIGIN_REFUSED)
    form = await body_of(request, LoginForm)
    address = request.client.host if request.client else ""
    new = await ctx.grafana.login(form.user, form.password, address)
    response = ok({"message": "Logged in",
                   "redirectUrl": (ctx.config.server.http_path_prefix or "") + "/",
                   "csrfToken": new.csrf})
    response.cookies.extend(_cookies(request, ctx, new.token, new.csrf,
                                     ctx.grafana.lifetimes.maximum))
    return response


@get(["/logout", "/logout/"], exception_handlers=_HANDLERS)
async def logout(request: Request, ctx: Ctx) -> Response:
    token = request.cookies.get(sessions.COOKIE)
    if token:
        await ctx.grafana.logout(token)
    # as Grafana: back to where one logs in, which for logstore is the page
    response = Response(content=b"", status_code=302, media_type="text/plain", headers={
        "Location": (ctx.config.server.http_path_prefix or "") + "/"})
    response.cookies.extend(_cookies(request, ctx, "", "", 0))
    return response


handlers: list[Any] = [login, logout]
