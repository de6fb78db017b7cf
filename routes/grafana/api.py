"""Grafana-compatible HTTP API under /api: search, dashboards, folders, stars, tags,
permissions, health and frontend settings. Thin handlers: parse, call one operation of the
Grafana service (which runs it in one read or one group-commit write), encode. Errors are
Grafana's JSON bodies, not Loki's text."""

from __future__ import annotations

from typing import Any

from litestar.params import FromPath
from litestar import Request, Response, Router, delete, get, post, put
from litestar.di import Provide
from litestar.exceptions import HTTPException

from routes.grafana import identity as grafana_identity
from routes.errors import INTERNAL_ERROR, log_internal_error
from routes.grafana import session
from routes.grafana.common import CallerDep, body_of, handle_grafana_error, \
    handle_http_exception, ok
from services.grafana import objects
from services.grafana import perms
from services.grafana import search as search_svc
from services.grafana.common import GRAFANA_VERSION, Caller, GrafanaError
from routes.deps import Ctx


def handle_unexpected(request: Request, exc: Exception) -> Response:
    """Grafana's JSON for what routes/errors.py logs and answers as text elsewhere."""
    if isinstance(exc, OverflowError):
        # an id past 64 bits in the path or the body: Grafana's parser refuses it (400)
        return ok({"message": "bad request data"}, 400)
    request_id = log_internal_error(request, exc)
    message = "Search failed" if request.url.path.rstrip("/") == "/api/search" else \
        INTERNAL_ERROR
    response = ok({"message": message, "requestId": request_id}, 500)
    response.headers["X-Request-Id"] = request_id
    return response


async def provide_caller(request: Request, ctx: Ctx) -> Caller:
    by_cookie = await session.cookie_caller(request, ctx)
    if by_cookie is not None:
        return by_cookie
    return await ctx.grafana.caller(request.headers.get("authorization"),
                                    request.headers.get("x-grafana-org-id"),
                                    request.client.host if request.client else "")


def query_of(request: Request) -> search_svc.Query:
    return search_svc.Query(request.scope.get("query_string", b""))


# -- probes ----------------------------------------------------------------------------------
@get(["/health", "/health/"])
async def health(ctx: Ctx) -> Response:
    try:
        await ctx.grafana.ping()
    except Exception:  # noqa: BLE001 - any database failure means "failing"
        return ok({"commit": "logstore", "database": "failing", "version": GRAFANA_VERSION}, 503)
    return ok({"commit": "logstore", "database": "ok", "version": GRAFANA_VERSION})


@get(["/frontend/settings", "/frontend/settings/"])
async def frontend_settings(ctx: Ctx) -> Response:
    # Grafana's sub path (its root_url's path) is where logstore's routes live
    return ok({"appSubUrl": ctx.config.server.http_path_prefix, "authProxyEnabled": False, "buildInfo": {
        "buildstamp": 0, "commit": "logstore", "edition": "Open Source", "env": "production",
        "hasUpdate": False, "hideVersion": False, "latestVersion": "", "version": GRAFANA_VERSION,
    }, "defaultDatasource": "", "featureToggles": {"nestedFolders": True}})


# -- search, tags, stars ---------------------------------------------------------------------
@get(["/search", "/search/"])
async def search(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    params = search_svc.parse(query_of(request))
    return ok(await ctx.grafana.search(caller, params))


@get(["/search/sorting", "/search/sorting/"])
async def search_sorting(caller: CallerDep) -> Response:
    return ok(search_svc.SORT_OPTIONS)


@get(["/dashboards/tags", "/dashboards/tags/"])
async def dashboard_tags(ctx: Ctx, caller: CallerDep) -> Response:
    return ok(await ctx.grafana.tag_cloud(caller))


@post(["/user/stars/dashboard/uid/{uid:str}", "/user/stars/dashboard/uid/{uid:str}/"],
      status_code=200)
async def star_uid(ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    await ctx.grafana.star(caller, True, uid, None)
    return ok({"message": "Dashboard starred!"})


@delete(["/user/stars/dashboard/uid/{uid:str}", "/user/stars/dashboard/uid/{uid:str}/"],
        status_code=200)
async def unstar_uid(ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    await ctx.grafana.star(caller, False, uid, None)
    return ok({"message": "Dashboard unstarred"})


@post(["/user/stars/dashboard/{dash_id:str}", "/user/stars/dashboard/{dash_id:str}/"],
      status_code=200)
async def star_id(ctx: Ctx, caller: CallerDep, dash_id: FromPath[str]) -> Response:
    await ctx.grafana.star(caller, True, None, dash_id)
    return ok({"message": "Dashboard starred!"})


@delete(["/user/stars/dashboard/{dash_id:str}", "/user/stars/dashboard/{dash_id:str}/"],
        status_code=200)
async def unstar_id(ctx: Ctx, caller: CallerDep, dash_id: FromPath[str]) -> Response:
    await ctx.grafana.star(caller, False, None, dash_id)
    return ok({"message": "Dashboard unstarred"})


@get(["/user/stars", "/user/stars/"])
async def user_stars(ctx: Ctx, caller: CallerDep) -> Response:
    return ok(await ctx.grafana.starred(caller))


# -- dashboards ---------------------------------------------------------------------------
@post(["/dashboards/db", "/dashboards/db/"], status_code=200)
async def save_dashboard(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    body = await body_of(request, objects.SaveDashboard)
    return ok(await ctx.grafana.save_dashboard(caller, body))


@get(["/dashboards/uid/{uid:str}", "/dashboards/uid/{uid:str}/"])
async def get_dashboard(ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    return ok(await ctx.grafana.get_dashboard(caller, uid))


@delete(["/dashboards/uid/{uid:str}", "/dashboards/uid/{uid:str}/"], status_code=200)
async def delete_dashboard(ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    return ok(await ctx.grafana.delete_dashboard(caller, uid))


@get(["/dashboards/home", "/dashboards/home/"])
async def home_dashboard(caller: CallerDep) -> Response:
    return ok({"meta": {"isHome": True, "canSave": False, "canEdit": False, "canAdmin": False,
                        "canStar": False, "canDelete": False, "slug": "", "url": "",
                        "expires": objects.ZERO_TIME, "created": objects.ZERO_TIME,
                        "updated": objects.ZERO_TIME, "version": 0, "folderTitle": "General",
                        "provisioned": False},
               "dashboard": {"title": "Home", "uid": "", "version": 0, "tags": [],
                             "panels": [], "schemaVersion": 39}})


async def _items(request: Request) -> list[perms.PermissionItem]:
    body = await body_of(request, perms.PermissionUpdate)
    return body.items or []


@get(["/dashboards/uid/{uid:str}/permissions", "/dashboards/uid/{uid:str}/permissions/"])
async def get_dashboard_permissions(ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    return ok(await ctx.grafana.dashboard_perms(caller, uid, None))


@post(["/dashboards/uid/{uid:str}/permissions", "/dashboards/uid/{uid:str}/permissions/"],
      status_code=200)
async def set_dashboard_permissions(request: Request, ctx: Ctx, caller: CallerDep,
                                    uid: FromPath[str]) -> Response:
    items = await _items(request)
    await ctx.grafana.set_dashboard_perms(caller, uid, None, items)
    return ok({"message": "Dashboard permissions updated"})


@get(["/dashboards/id/{dash_id:str}/permissions", "/dashboards/id/{dash_id:str}/permissions/"])
async def get_dashboard_permissions_by_id(ctx: Ctx, caller: CallerDep,
                                          dash_id: FromPath[str]) -> Response:
    return ok(await ctx.grafana.dashboard_perms(caller, None, dash_id))


@post(["/dashboards/id/{dash_id:str}/permissions", "/dashboards/id/{dash_id:str}/permissions/"],
      status_code=200)
async def set_dashboard_permissions_by_id(request: Request, ctx: Ctx, caller: CallerDep,
                                          dash_id: FromPath[str]) -> Response:
    items = await _items(request)
    await ctx.grafana.set_dashboard_perms(caller, None, dash_id, items)
    return ok({"message": "Dashboard permissions updated"})


# -- folders -------------------------------------------------------------------------------
@get(["/folders", "/folders/"])
async def list_folders(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    q = query_of(request)
    limit = q.int("limit")
    page = q.int("page")
    return ok(await ctx.grafana.list_folders(caller, q.first("parentUid"),
                                          limit if limit > 0 else 1000,
                                          page if page > 0 else 1))


@post(["/folders", "/folders/"], status_code=200)
async def create_folder(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    body = await body_of(request, objects.CreateFolder)
    return ok(await ctx.grafana.create_folder(caller, body))


@get(["/folders/{uid:str}", "/folders/{uid:str}/"])
async def get_folder(ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    return ok(await ctx.grafana.folder(caller, uid))


@get(["/folders/id/{folder_id:str}", "/folders/id/{folder_id:str}/"])
async def get_folder_by_id(ctx: Ctx, caller: CallerDep, folder_id: FromPath[str]) -> Response:
    return ok(await ctx.grafana.folder_by_id(caller, folder_id))


@put(["/folders/{uid:str}", "/folders/{uid:str}/"])
async def update_folder(request: Request, ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    body = await body_of(request, objects.UpdateFolder)
    return ok(await ctx.grafana.update_folder(caller, uid, body))


@delete(["/folders/{uid:str}", "/folders/{uid:str}/"], status_code=200)
async def delete_folder(ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    return ok(await ctx.grafana.delete_folder(caller, uid))


@post(["/folders/{uid:str}/move", "/folders/{uid:str}/move/"], status_code=200)
async def move_folder(request: Request, ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    body = await body_of(request, objects.MoveFolder)
    return ok(await ctx.grafana.move_folder(caller, uid, body))


@get(["/folders/{uid:str}/permissions", "/folders/{uid:str}/permissions/"])
async def get_folder_permissions(ctx: Ctx, caller: CallerDep, uid: FromPath[str]) -> Response:
    return ok(await ctx.grafana.folder_perms(caller, uid))


@post(["/folders/{uid:str}/permissions", "/folders/{uid:str}/permissions/"], status_code=200)
async def set_folder_permissions(request: Request, ctx: Ctx, caller: CallerDep,
                                 uid: FromPath[str]) -> Response:
    items = await _items(request)
    await ctx.grafana.set_folder_perms(caller, uid, items)
    return ok({"message": "Folder permissions updated"})


router = Router(
    path="/api",
    route_handlers=[
        health, frontend_settings, search, search_sorting, dashboard_tags, star_uid, unstar_uid,
        star_id, unstar_id, user_stars, save_dashboard, get_dashboard, delete_dashboard, home_dashboard,
        get_dashboard_permissions, set_dashboard_permissions, get_dashboard_permissions_by_id,
        set_dashboard_permissions_by_id, list_folders, create_folder, get_folder,
        get_folder_by_id, update_folder, delete_folder, move_folder, get_folder_permissions,
        set_folder_permissions, *grafana_identity.handlers,
    ],
    dependencies={"caller": Provide(provide_caller)},
    exception_handlers={GrafanaError: handle_grafana_error, HTTPException: handle_http_exception,
                        Exception: handle_unexpected},
)

handlers: list[Any] = [router, *session.handlers]

