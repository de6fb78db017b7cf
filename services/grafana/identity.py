"""Users, org membership, teams, service accounts and their tokens (spec §3.6-§3.8)."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from datetime import datetime, timezone
from typing import Any

import msgspec

from services.grafana.auth import check_password, new_token, new_uid, token_digest
from services.grafana.common import (ROLES, Caller, Clock, GrafanaError, bad_request, forbidden,
                                     now_text)
from storage.grafana import identity as ident


def require_org_admin(caller: Caller) -> None:
    if not caller.is_org_admin:
        raise forbidden()


def require_server_admin(caller: Caller) -> None:
    if caller.is_service_account or not caller.is_server_admin:
        raise forbidden()


def avatar(email: str) -> str:
    return "/avatar/" + hashlib.md5(email.strip().lower().encode()).hexdigest()


def check_role(role: str) -> None:
    if role not in ROLES:
        raise bad_request(f"invalid role value: {role}")


# -- users -------------------------------------------------------------------------------------
class CreateUser(msgspec.Struct):
    login: str = ""
    email: str = ""
    name: str = ""
    password: str = ""
    OrgId: int | None = None


class Password(msgspec.Struct):
    password: str = ""


class ChangePassword(msgspec.Struct):
    oldPassword: str = ""
    newPassword: str = ""
    confirmNew: str | None = None


class AddOrgUser(msgspec.Struct):
    loginOrEmail: str = ""
    role: str = "Viewer"


class RolePatch(msgspec.Struct):
    role: str = ""


def create_user(conn: sqlite3.Connection, caller: Caller, body: CreateUser, hashed: str) -> dict:
    """`hashed` is hash_password(body.password), computed off the writer thread."""
    require_server_admin(caller)
    login = body.login or body.email
    if not login:
        raise bad_request("login or email is required")
    if len(body.password) < 4:
        raise bad_request("Password is missing or too short")
    if ident.login_or_email_taken(conn, login, body.email):
        raise GrafanaError(412, "User with same email or login already exists")
    user_id = ident.insert_user(conn, uid=new_uid(), login=login, email=body.email,
                                name=body.name or login, password_hash=hashed,
                                is_admin=False, is_service_account=False, org_id=caller.org_id,
                                role="Viewer", now=now_text())
    return {"id": user_id, "message": "User created"}


def set_user_password(conn: sqlite3.Connection, caller: Caller, user_id: int,
                      body: Password, hashed: str) -> dict:
    require_server_admin(caller)
    if len(body.password) < 4:
        raise bad_request("New password is too short")
    if not ident.set_password(conn, user_id, hashed, now_text()):
        raise GrafanaError(404, "user not found")
    return {"message": "User password updated"}


def change_own_password(conn: sqlite3.Connection, caller: Caller, body: ChangePassword,
                        hashed: str) -> dict:
    user = ident.user_by_id(conn, caller.user_id)
    if user is None or caller.is_service_account:
        raise bad_request("Service accounts have no password")
    if not check_password(body.oldPassword, user["password_hash"]):
        raise GrafanaError(401, "Invalid old password")
    if body.confirmNew is not None and body.confirmNew != body.newPassword:
        raise bad_request("New password and confirmation do not match")
    if len(body.newPassword) < 4:
        raise bad_request("New password is too short")
    ident.set_password(conn, caller.user_id, hashed, now_text())
    return {"message": "User password changed"}


def profile(conn: sqlite3.Connection, caller: Caller) -> dict:
    user = ident.user_by_id(conn, caller.user_id)
    if user is None:
        raise GrafanaError(404, "user not found")
    return {"id": user["id"], "uid": user["uid"], "email": user["email"], "name": user["name"],
            "login": user["login"], "theme": "", "orgId": caller.org_id,
            "isGrafanaAdmin": bool(user["is_admin"]), "isDisabled": bool(user["is_disabled"]),
            "isExternal": False, "isExternallySynced": False,
            "isGrafanaAdminExternallySynced": False, "authLabels": [],
            "updatedAt": user["updated"], "createdAt": user["created"],
            "avatarUrl": avatar(user["email"])}


def org_users(conn: sqlite3.Connection, caller: Caller) -> list[dict]:
    require_org_admin(caller)
    return [{"orgId": caller.org_id, "userId": u["id"], "email": u["email"], "name": u["name"],
             "avatarUrl": avatar(u["email"]), "login": u["login"], "role": u["role"],
             "lastSeenAt": u["updated"], "lastSeenAtAge": ""}
            for u in ident.org_users(conn, caller.org_id)]


def add_org_user(conn: sqlite3.Connection, caller: Caller, body: AddOrgUser) -> dict:
    require_org_admin(caller)
    check_role(body.role)
    user = ident.user_by_login_or_email(conn, body.loginOrEmail)
    if user is None:
        raise GrafanaError(404, "User not found")
    if not ident.add_org_user(conn, caller.org_id, user["id"], body.role, now_text()):
        raise GrafanaError(409, "User is already member of this organization")
    return {"message": "User added to organization", "userId": user["id"]}


def patch_org_user(conn: sqlite3.Connection, caller: Caller, user_id: int,
                   body: RolePatch) -> dict:
    require_org_admin(caller)
    check_role(body.role)
    if not ident.set_org_role(conn, caller.org_id, user_id, body.role, now_text()):
        raise GrafanaError(404, "User not found")
    return {"message": "Organization user updated"}


# -- teams -------------------------------------------------------------------------------------
class CreateTeam(msgspec.Struct):
    name: str = ""
    email: str = ""


class TeamMember(msgspec.Struct):
    userId: int = 0


def create_team(conn: sqlite3.Connection, caller: Caller, body: CreateTeam) -> dict:
    require_org_admin(caller)
    if not body.name:
        raise bad_request("team name is required")
    if ident.team_name_taken(conn, caller.org_id, body.name):
        raise GrafanaError(409, "Team name taken")
    uid = new_uid()
    team_id = ident.insert_team(conn, caller.org_id, uid, body.name, body.email, now_text())
    return {"message": "Team created", "teamId": team_id, "uid": uid}


def search_teams(conn: sqlite3.Connection, caller: Caller, query: str, page: int,
                 perpage: int) -> dict:
    require_org_admin(caller)
    total, rows = ident.search_teams(conn, caller.org_id, query, perpage, (page - 1) * perpage)
    return {"totalCount": total, "teams": [
        {"id": r["id"], "uid": r["uid"], "orgId": r["org_id"], "name": r["name"],
         "email": r["email"], "avatarUrl": avatar(r["email"]), "memberCount": r["member_count"]}
        for r in rows], "page": page, "perPage": perpage}


def add_team_member(conn: sqlite3.Connection, caller: Caller, team_id: int,
                    body: TeamMember) -> dict:
    require_org_admin(caller)
    if ident.team_by_id(conn, caller.org_id, team_id) is None:
        raise GrafanaError(404, "Team not found")
    if ident.org_role(conn, caller.org_id, body.userId) is None:
        raise GrafanaError(404, "User not found")
    if not ident.add_team_member(conn, team_id, body.userId):
        raise GrafanaError(400, "User is already added to this team")
    return {"message": "Member added to Team"}


def remove_team_member(conn: sqlite3.Connection, caller: Caller, team_id: int,
                       user_id: int) -> dict:
    require_org_admin(caller)
    if ident.team_by_id(conn, caller.org_id, team_id) is None:
        raise GrafanaError(404, "Team not found")
    if not ident.remove_team_member(conn, team_id, user_id):
        raise GrafanaError(404, "Team member not found")
    return {"message": "Team Member removed"}


# -- service accounts ---------------------------------------------------------------------------
class CreateServiceAccount(msgspec.Struct):
    name: str = ""
    role: str = "Viewer"
    isDisabled: bool = False


class PatchServiceAccount(msgspec.Struct):
    name: str | None = None
    role: str | None = None
    isDisabled: bool | None = None


class CreateToken(msgspec.Struct):
    name: str = ""
    secondsToLive: int = 0


def _sa_dto(r: dict[str, Any]) -> dict:
    return {"id": r["id"], "uid": r["uid"], "name": r["name"], "login": r["login"],
            "orgId": r["org_id"], "isDisabled": bool(r["is_disabled"]), "role": r["role"],
            "tokens": r["tokens"], "avatarUrl": avatar(r["login"]),
            "createdAt": r["created"], "updatedAt": r["updated"]}


def _sa(conn: sqlite3.Connection, caller: Caller, sa_id: int) -> dict[str, Any]:
    require_org_admin(caller)
    row = ident.service_account(conn, caller.org_id, sa_id)
    if row is None:
        raise GrafanaError(404, "service account not found")
    return row


def _sa_login(name: str) -> str:
    return "sa-" + re.sub(r"[^a-z0-9._-]+", "-", name.strip().lower())


def create_service_account(conn: sqlite3.Connection, caller: Caller,
                           body: CreateServiceAccount) -> dict:
    require_org_admin(caller)
    if not body.name.strip():
        raise bad_request("service account name is required")
    check_role(body.role)
    login = _sa_login(body.name)
    if ident.login_or_email_taken(conn, login, ""):
        raise GrafanaError(409, "service account already exists")
    sa_id = ident.insert_user(conn, uid=new_uid(), login=login, email="", name=body.name,
                              password_hash="", is_admin=False, is_service_account=True,
                              org_id=caller.org_id, role=body.role, now=now_text(),
                              is_disabled=body.isDisabled)
    return _sa_dto(ident.service_account(conn, caller.org_id, sa_id))


def get_service_account(conn: sqlite3.Connection, caller: Caller, sa_id: int) -> dict:
    return _sa_dto(_sa(conn, caller, sa_id))


def patch_service_account(conn: sqlite3.Connection, caller: Caller, sa_id: int,
                          body: PatchServiceAccount) -> dict:
    _sa(conn, caller, sa_id)
    now = now_text()
    if body.role is not None:
        check_role(body.role)
        ident.set_org_role(conn, caller.org_id, sa_id, body.role, now)
    ident.update_service_account(conn, sa_id, body.name, body.isDisabled, now)
    dto = _sa_dto(ident.service_account(conn, caller.org_id, sa_id))
    return {"id": sa_id, "message": "Service account updated", "name": dto["name"],
            "serviceaccount": dto}


def delete_service_account(conn: sqlite3.Connection, caller: Caller, sa_id: int) -> dict:
    _sa(conn, caller, sa_id)
    ident.delete_principal(conn, sa_id)
    return {"message": "Service account deleted"}


def search_service_accounts(conn: sqlite3.Connection, caller: Caller, query: str, page: int,
                            perpage: int) -> dict:
    require_org_admin(caller)
    total, rows = ident.search_service_accounts(conn, caller.org_id, query, perpage,
                                                (page - 1) * perpage)
    return {"totalCount": total, "serviceAccounts": [_sa_dto(r) for r in rows],
            "page": page, "perPage": perpage}


def create_token(conn: sqlite3.Connection, caller: Caller, sa_id: int, body: CreateToken) -> dict:
    _sa(conn, caller, sa_id)
    if not body.name:
        raise bad_request("token name is required")
    if ident.token_name_taken(conn, sa_id, body.name):
        raise GrafanaError(409, "service account token with given name already exists in the "
                                "organization")
    key = new_token()
    digest = token_digest(key)
    assert digest is not None
    expires = int(Clock.now()) + body.secondsToLive if body.secondsToLive > 0 else None
    token_id = ident.insert_token(conn, caller.org_id, sa_id, body.name, digest, now_text(),
                                  expires)
    return {"id": token_id, "name": body.name, "key": key}


def list_tokens(conn: sqlite3.Connection, caller: Caller, sa_id: int) -> list[dict]:
    _sa(conn, caller, sa_id)
    out = []
    now = Clock.now()
    for t in ident.tokens_of(conn, sa_id):
        expires = t["expires"]
        out.append({
            "id": t["id"], "name": t["name"], "created": t["created"],
            "lastUsedAt": t["last_used_at"],
            "expiration": (datetime.fromtimestamp(expires, timezone.utc)
                           .strftime("%Y-%m-%dT%H:%M:%SZ") if expires else None),
            "secondsUntilExpiration": max(0, int(expires - now)) if expires else 0,
            "hasExpired": bool(expires and expires <= now), "isRevoked": False})
    return out


def delete_token(conn: sqlite3.Connection, caller: Caller, sa_id: int, token_id: int) -> dict:
    _sa(conn, caller, sa_id)
    if not ident.delete_token(conn, sa_id, token_id):
        raise GrafanaError(404, "service account token not found")
    return {"message": "Service account token deleted"}
