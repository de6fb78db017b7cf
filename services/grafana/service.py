"""The Grafana API's operations for routes/grafana/*.py, each owning its transaction.

The functions of grafana_access, grafana_objects, grafana_search and grafana_identity take a
connection and do one operation's work; here each runs inside one read (a snapshot on a
reader thread) or one group-commit write (all of it lands, or none of it), so a route never
chooses either, nor sees the database. Also here: who the caller is (with brute-force
login limiting) and the initial admin created at the first start.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any, Callable, TypeVar

from config import GrafanaConfig
from logql.errors import StoreUnavailable
from services.grafana import access
from services.grafana import identity as ident
from services.grafana import objects
from services.grafana import search
from services.grafana import sessions
from services.grafana.auth import GENERATED_PASSWORD_ITERATIONS, PBKDF2_ITERATIONS, \
    BAD_CREDENTIALS, authenticate, bootstrap, hash_password, \
    parse_authorization, password_user
from services.grafana.common import Caller, GrafanaError, unavailable
from services.grafana.perms import PermissionItem
from services.grafana.login_attempts import BLOCKED_TEXT, LoginAttempts
from storage.db import Database

log = logging.getLogger("logstore.grafana")
T = TypeVar("T")


async def _hashed(password: str) -> str:
    # PBKDF2 is deliberately slow: keep it off the event loop and off the writer thread
    return await asyncio.to_thread(hash_password, password)


class GrafanaService:
    def __init__(self, db: Database, cfg: GrafanaConfig):
        self.db = db
        self.cfg = cfg
        self.login_attempts = LoginAttempts(
            cfg.brute_force_login_protection_max_attempts,
            enabled=not cfg.disable_brute_force_login_protection)
        self.lifetimes = sessions.Lifetimes(cfg.login_maximum_lifetime_duration // 10**9,
                                            cfg.login_maximum_inactive_lifetime_duration
                                            // 10**9)

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await self.db.write(lambda conn: fn(conn, *args))
        except StoreUnavailable as exc:
            raise unavailable(exc) from None

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await self.db.read(fn, *args)
        except StoreUnavailable as exc:
            raise unavailable(exc) from None

    # -- lifespan --------------------------------------------------------------------------
    async def start(self) -> None:
        """Create org 1 and the initial admin when there are no users yet."""
        login, password = self.cfg.admin_user, self.cfg.admin_password
        generated = not password
        if generated:
            password = secrets.token_urlsafe(18)
        created = await self._write(bootstrap, login, password,
                                    GENERATED_PASSWORD_ITERATIONS if generated
                                    else PBKDF2_ITERATIONS)
        if created and generated:
            # shown once: the database keeps only a hash. So it is written whatever the log
            # level: at info, or at the configured level when that is higher
            log.log(max(logging.INFO, log.getEffectiveLevel()),
                    "created the Grafana API admin. Log in with user '%s' and password '%s' "
                    "(HTTP Basic auth on /api/...). This password is shown only now; change "
                    "it with PUT /api/user/password.", login, password)
        elif created:
            log.info("created the Grafana API admin %r with the configured password", login)

    # -- the caller --------------------------------------------------------------------------
    async def caller(self, header: str | None, org_header: str | None, address: str) -> Caller:
        """Who the Authorization header proves, or a 401/429 GrafanaError; failed Basic
        logins count against the login and the client address."""
        parsed = parse_authorization(header)
        login = parsed[1] if parsed is not None and parsed[0] == "basic" else None
        if login is None:
            return await self._read(authenticate, header, org_header)
        return await self._limited(login, address, authenticate, header, org_header)

    async def _limited(self, login: str, address: str, check: Callable[..., T],
                       *args: Any) -> T:
        """A password check (Basic auth or POST /login) under brute-force login limiting."""
        attempts = self.login_attempts
        if attempts.blocked(login, address):
            raise GrafanaError(429, BLOCKED_TEXT)
        try:
            result = await self._read(check, *args)
        except GrafanaError as exc:
            if exc.message == BAD_CREDENTIALS:
                attempts.failed(login, address)
            raise
        attempts.succeeded(login)
        return result

    # -- sessions (services/grafana/sessions.py) -----------------------------------------
    async def login(self, login: str, password: str, address: str) -> sessions.NewSession:
        user = await self._limited(login, address, password_user, login, password)
        return await self._write(sessions.open_session, user, self.lifetimes)

    async def session_caller(self, token: str,
                             org_header: str | None) -> sessions.SessionCaller:
        found = await self._read(sessions.resolve, token, org_header, self.lifetimes)
        if found.stale:
            await self._write(sessions.touch, found.session_id)
        return found

    async def logout(self, token: str) -> None:
        await self._write(sessions.close, token)

    async def ping(self) -> None:
        await self._read(access.ping)

    # -- search, tags, stars -----------------------------------------------------------------
    async def search(self, caller: Caller, params: search.SearchParams) -> list[search.Hit]:
        return await self._read(search.run, caller, params)

    async def tag_cloud(self, caller: Caller) -> list:
        return await self._read(access.tag_cloud, caller)

    async def starred(self, caller: Caller) -> list:
        return await self._read(access.starred, caller)

    async def star(self, caller: Caller, on: bool, uid: str | None,
                   raw_id: str | None) -> None:
        await self._write(access.star, caller, on, uid, raw_id)

    # -- dashboards --------------------------------------------------------------------------
    async def save_dashboard(self, caller: Caller, body: objects.SaveDashboard) -> dict:
        return await self._write(objects.save_dashboard, caller, body)

    async def get_dashboard(self, caller: Caller, uid: str) -> dict[str, Any]:
        return await self._read(objects.get_dashboard, caller, uid)

    async def delete_dashboard(self, caller: Caller, uid: str) -> dict[str, Any]:
        return await self._write(objects.delete_dashboard, caller, uid)

    async def dashboard_perms(self, caller: Caller, uid: str | None,
                              raw_id: str | None) -> list:
        return await self._read(access.dashboard_perms, caller, uid, raw_id)

    async def set_dashboard_perms(self, caller: Caller, uid: str | None, raw_id: str | None,
                                  items: list[PermissionItem]) -> None:
        await self._write(access.set_dashboard_perms, caller, uid, raw_id, items)

    # -- folders -----------------------------------------------------------------------------
    async def list_folders(self, caller: Caller, parent_uid: str | None, limit: int,
                           page: int) -> list[dict[str, Any]]:
        return await self._read(objects.list_folders, caller, parent_uid, limit, page)

    async def create_folder(self, caller: Caller, body: objects.CreateFolder) -> dict:
        return await self._write(objects.create_folder, caller, body)

    async def folder(self, caller: Caller, uid: str) -> dict:
        return await self._read(access.folder_dto, caller, uid)

    async def folder_by_id(self, caller: Caller, raw_id: str) -> dict:
        return await self._read(access.folder_dto_by_id, caller, raw_id)

    async def update_folder(self, caller: Caller, uid: str, body: objects.UpdateFolder) -> dict:
        return await self._write(objects.update_folder, caller, uid, body)

    async def delete_folder(self, caller: Caller, uid: str) -> dict:
        return await self._write(objects.delete_folder, caller, uid)

    async def move_folder(self, caller: Caller, uid: str, body: objects.MoveFolder) -> dict:
        return await self._write(objects.move_folder, caller, uid, body)

    async def folder_perms(self, caller: Caller, uid: str) -> list:
        return await self._read(access.folder_perms, caller, uid)

    async def set_folder_perms(self, caller: Caller, uid: str,
                               items: list[PermissionItem]) -> None:
        await self._write(access.set_folder_perms, caller, uid, items)

    # -- users -------------------------------------------------------------------------------
    async def profile(self, caller: Caller) -> dict:
        return await self._read(ident.profile, caller)

    async def change_own_password(self, caller: Caller, body: ident.ChangePassword) -> dict:
        hashed = await _hashed(body.newPassword)
        return await self._write(ident.change_own_password, caller, body, hashed)

    async def create_user(self, caller: Caller, body: ident.CreateUser) -> dict:
        hashed = await _hashed(body.password)
        return await self._write(ident.create_user, caller, body, hashed)

    async def set_user_password(self, caller: Caller, user_id: int,
                                body: ident.Password) -> dict:
        hashed = await _hashed(body.password)
        return await self._write(ident.set_user_password, caller, user_id, body, hashed)

    async def org_users(self, caller: Caller) -> list[dict]:
        return await self._read(ident.org_users, caller)

    async def add_org_user(self, caller: Caller, body: ident.AddOrgUser) -> dict:
        return await self._write(ident.add_org_user, caller, body)

    async def patch_org_user(self, caller: Caller, user_id: int, body: ident.RolePatch) -> dict:
        return await self._write(ident.patch_org_user, caller, user_id, body)

    # -- teams -------------------------------------------------------------------------------
    async def create_team(self, caller: Caller, body: ident.CreateTeam) -> dict:
        return await self._write(ident.create_team, caller, body)

    async def search_teams(self, caller: Caller, query: str, page: int, perpage: int) -> dict:
        return await self._read(ident.search_teams, caller, query, page, perpage)

    async def add_team_member(self, caller: Caller, team_id: int,
                              body: ident.TeamMember) -> dict:
        return await self._write(ident.add_team_member, caller, team_id, body)

    async def remove_team_member(self, caller: Caller, team_id: int, user_id: int) -> dict:
        return await self._write(ident.remove_team_member, caller, team_id, user_id)

    # -- service accounts and tokens ---------------------------------------------------------
    async def create_service_account(self, caller: Caller,
                                     body: ident.CreateServiceAccount) -> dict:
        return await self._write(ident.create_service_account, caller, body)

    async def search_service_accounts(self, caller: Caller, query: str, page: int,
                                      perpage: int) -> dict:
        return await self._read(ident.search_service_accounts, caller, query, page, perpage)

    async def get_service_account(self, caller: Caller, sa_id: int) -> dict:
        return await self._read(ident.get_service_account, caller, sa_id)

    async def patch_service_account(self, caller: Caller, sa_id: int,
                                    body: ident.PatchServiceAccount) -> dict:
        return await self._write(ident.patch_service_account, caller, sa_id, body)

    async def delete_service_account(self, caller: Caller, sa_id: int) -> dict:
        return await self._write(ident.delete_service_account, caller, sa_id)

    async def create_token(self, caller: Caller, sa_id: int, body: ident.CreateToken) -> dict:
        return await self._write(ident.create_token, caller, sa_id, body)

    async def list_tokens(self, caller: Caller, sa_id: int) -> list[dict]:
        return await self._read(ident.list_tokens, caller, sa_id)

    async def delete_token(self, caller: Caller, sa_id: int, token_id: int) -> dict:
        return await self._write(ident.delete_token, caller, sa_id, token_id)
