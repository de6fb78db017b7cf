"""Grafana-compatible identity endpoints: current user, admin users, org users, teams,
service accounts and tokens. Mounted under /api by routes/grafana/api.py."""

from __future__ import annotations

from typing import Any

from litestar.params import FromPath
from litestar import Request, Response, delete, get, patch, post, put

from routes.grafana import session
from routes.grafana.common import CallerDep, body_of, ok
from services.grafana import identity as svc
from services.grafana.common import GrafanaError
from routes.deps import Ctx
from services.grafana.search import Query


def paging(request: Request) -> tuple[str, int, int]:
    q = Query(request.scope.get("query_string", b""))
    page, perpage = q.int("page"), q.int("perpage")
    return q.first("query") or "", page if page > 0 else 1, perpage if perpage > 0 else 1000


def _paths(path: str) -> list[str]:
    return [path, path + "/"]


@get(_paths("/user"))
async def current_user(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    response = ok(await ctx.grafana.profile(caller))
    response.headers.update(session.csrf_headers(request, ctx))
    return response


@put(_paths("/user/password"))
async def change_password(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    body = await body_of(request, svc.ChangePassword)
    return ok(await ctx.grafana.change_own_password(caller, body))


@post(_paths("/admin/users"), status_code=200)
async def admin_create_user(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    svc.require_server_admin(caller)
    body = await body_of(request, svc.CreateUser)
    return ok(await ctx.grafana.create_user(caller, body))


@put(_paths("/admin/users/{user_id:int}/password"))
async def admin_set_password(request: Request, ctx: Ctx, caller: CallerDep,
                             user_id: FromPath[int]) -> Response:
    svc.require_server_admin(caller)
    body = await body_of(request, svc.Password)
    return ok(await ctx.grafana.set_user_password(caller, user_id, body))


@get(_paths("/org/users"))
async def org_users(ctx: Ctx, caller: CallerDep) -> Response:
    return ok(await ctx.grafana.org_users(caller))


@post(_paths("/org/users"), status_code=200)
async def add_org_user(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    body = await body_of(request, svc.AddOrgUser)
    return ok(await ctx.grafana.add_org_user(caller, body))


@patch(_paths("/org/users/{user_id:int}"))
async def patch_org_user(request: Request, ctx: Ctx, caller: CallerDep,
                         user_id: FromPath[int]) -> Response:
    body = await body_of(request, svc.RolePatch)
    return ok(await ctx.grafana.patch_org_user(caller, user_id, body))


@patch(_paths("/orgs/{org_id:int}/users/{user_id:int}"))
async def patch_orgs_user(request: Request, ctx: Ctx, caller: CallerDep, org_id: FromPath[int],
                          user_id: FromPath[int]) -> Response:
    if org_id != caller.org_id:
        raise GrafanaError(403, "You'll need additional permissions to perform this action.")
    body = await body_of(request, svc.RolePatch)
    return ok(await ctx.grafana.patch_org_user(caller, user_id, body))


@post(_paths("/teams"), status_code=200)
async def create_team(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    body = await body_of(request, svc.CreateTeam)
    return ok(await ctx.grafana.create_team(caller, body))


@get(_paths("/teams/search"))
async def search_teams(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    return ok(await ctx.grafana.search_teams(caller, *paging(request)))


@post(_paths("/teams/{team_id:int}/members"), status_code=200)
async def add_team_member(request: Request, ctx: Ctx, caller: CallerDep,
                          team_id: FromPath[int]) -> Response:
    body = await body_of(request, svc.TeamMember)
    return ok(await ctx.grafana.add_team_member(caller, team_id, body))


@delete(_paths("/teams/{team_id:int}/members/{user_id:int}"), status_code=200)
async def remove_team_member(ctx: Ctx, caller: CallerDep, team_id: FromPath[int],
                             user_id: FromPath[int]) -> Response:
    return ok(await ctx.grafana.remove_team_member(caller, team_id, user_id))


@post(_paths("/serviceaccounts"), status_code=201)
async def create_service_account(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    body = await body_of(request, svc.CreateServiceAccount)
    return ok(await ctx.grafana.create_service_account(caller, body), 201)


@get(_paths("/serviceaccounts/search"))
async def search_service_accounts(request: Request, ctx: Ctx, caller: CallerDep) -> Response:
    return ok(await ctx.grafana.search_service_accounts(caller, *paging(request)))


@get(_paths("/serviceaccounts/{sa_id:int}"))
async def get_service_account(ctx: Ctx, caller: CallerDep, sa_id: FromPath[int]) -> Response:
    return ok(await ctx.grafana.get_service_account(caller, sa_id))


@patch(_paths("/serviceaccounts/{sa_id:int}"))
async def patch_service_account(request: Request, ctx: Ctx, caller: CallerDep,
                                sa_id: FromPath[int]) -> Response:
    body = await body_of(request, svc.PatchServiceAccount)
    return ok(await ctx.grafana.patch_service_account(caller, sa_id, body))


@delete(_paths("/serviceaccounts/{sa_id:int}"), status_code=200)
async def delete_service_account(ctx: Ctx, caller: CallerDep, sa_id: FromPath[int]) -> Response:
    return ok(await ctx.grafana.delete_service_account(caller, sa_id))


@post(_paths("/serviceaccounts/{sa_id:int}/tokens"), status_code=200)
async def create_token(request: Request, ctx: Ctx, caller: CallerDep, sa_id: FromPath[int]) -> Response:
    body = await body_of(request, svc.CreateToken)
    return ok(await ctx.grafana.create_token(caller, sa_id, body))


@get(_paths("/serviceaccounts/{sa_id:int}/tokens"))
async def list_tokens(ctx: Ctx, caller: CallerDep, sa_id: FromPath[int]) -> Response:
    return ok(await ctx.grafana.list_tokens(caller, sa_id))


@delete(_paths("/serviceaccounts/{sa_id:int}/tokens/{token_id:int}"), status_code=200)
async def delete_token(ctx: Ctx, caller: CallerDep, sa_id: FromPath[int], token_id: FromPath[int]) -> Response:
    return ok(await ctx.grafana.delete_token(caller, sa_id, token_id))


handlers: list[Any] = [
    current_user, change_password, admin_create_user, admin_set_password, org_users,
    add_org_user, patch_org_user, patch_orgs_user, create_team, search_teams, add_team_member, remove_team_member,
    create_service_account, search_service_accounts, get_service_account, patch_service_account,
    delete_service_account, create_token, list_tokens, delete_token,
]
