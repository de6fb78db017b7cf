"""Grafana's session login for the web page: `POST /login` with `{"user", "password"}` sets
the session cookie (`logstore_session` unless `grafana.login_cookie_name` says otherwise) and
answers the session's CSRF token, `GET /logout` ends the session; the Grafana API under /api
then accepts the cookie where it accepts Basic auth (services/grafana/sessions.py says how
sessions and their CSRF tokens work)."""

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


def _cookie(request: Request, ctx: Ctx, token: str, max_age: int) -> Cookie:
    # Path: the page and the API live under server.http_path_prefix; Strict: no other site's
    # page, link or form ever sends it
    return Cookie(key=ctx.grafana.cfg.login_cookie_name, value=token,
                  path=ctx.config.server.http_path_prefix or "/", max_age=max_age,
                  httponly=True, samesite="strict", secure=_over_https(request))


def _session_token(request: Request, ctx: Ctx) -> str | None:
    """The session cookie's token, unless an Authorization header (which wins) is sent."""
    if request.headers.get("authorization"):
        return None
    return request.cookies.get(ctx.grafana.cfg.login_cookie_name) or None


def csrf_headers(request: Request, ctx: Ctx) -> dict[str, str]:
    """For GET /api/user: the session's CSRF token again, so a reloaded page has it (the
    session was checked by the time this runs)."""
    token = _session_token(request, ctx)
    return {sessions.CSRF_HEADER: sessions.csrf_token(token)} if token else {}


async def cookie_caller(request: Request, ctx: Ctx) -> Caller | None:
    """The caller a session cookie proves when the request has no Authorization header,
    CSRF-checked; None when there is no cookie either."""
    token = _session_token(request, ctx)
    if token is None:
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
    response.cookies.append(_cookie(request, ctx, new.token, ctx.grafana.lifetimes.maximum))
    return response


@get(["/logout", "/logout/"], exception_handlers=_HANDLERS)
async def logout(request: Request, ctx: Ctx) -> Response:
    token = request.cookies.get(ctx.grafana.cfg.login_cookie_name)
    if token:
        await ctx.grafana.logout(token)
    # as Grafana: back to where one logs in, which for logstore is the page
    response = Response(content=b"", status_code=302, media_type="text/plain", headers={
        "Location": (ctx.config.server.http_path_prefix or "") + "/"})
    response.cookies.append(_cookie(request, ctx, "", 0))
    return response


handlers: list[Any] = [login, logout]
