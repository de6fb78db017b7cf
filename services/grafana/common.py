"""Shared pieces of the Grafana-compatible API: its error type, the caller, time stamps."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from logql.gocompat.values import GoParseError, go_atoi

ORG_ID = 1
ORG_NAME = "Main Org."
GRAFANA_VERSION = "11.3.0"
ROLES = ("Admin", "Editor", "Viewer", "None")
VIEW, EDIT, ADMIN = 1, 2, 4
LEVEL_NAMES = {VIEW: "View", EDIT: "Edit", ADMIN: "Admin"}


class GrafanaError(Exception):
    """A request that cannot be served, answered as Grafana does: JSON with `message`
    and sometimes `status` (a short machine code)."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code

    def body(self) -> dict:
        out: dict = {"message": self.message}
        if self.code:
            out["status"] = self.code
        return out


def unauthorized(message: str = "Unauthorized") -> GrafanaError:
    return GrafanaError(401, message)


def forbidden(message: str = "You'll need additional permissions to perform this action.") \
        -> GrafanaError:
    return GrafanaError(403, message)


def bad_request(message: str = "bad request data") -> GrafanaError:
    return GrafanaError(400, message)


def unavailable(exc: Exception) -> GrafanaError:
    """The store of Grafana's objects cannot answer (the cluster's PostgreSQL is away): 503,
    worth retrying, as Grafana's JSON rather than the text Loki's routes answer."""
    return GrafanaError(503, f"the Grafana database is unavailable: {exc}")


def dashboard_not_found() -> GrafanaError:
    return GrafanaError(404, "Dashboard not found")


def folder_not_found() -> GrafanaError:
    return GrafanaError(404, "folder not found", "not-found")


@dataclass(frozen=True)
class Caller:
    """Who is asking: a user or a service account, in one org, with one basic role."""
    user_id: int
    login: str
    org_id: int
    role: str                      # Admin | Editor | Viewer | None
    is_server_admin: bool = False
    is_service_account: bool = False
    team_ids: tuple[int, ...] = field(default_factory=tuple)

    @property
    def is_org_admin(self) -> bool:
        return self.role == "Admin"


class Clock:
    """Wall-clock seconds for token expiry; tests set `offset` to move time on."""
    offset = 0.0

    @classmethod
    def now(cls) -> float:
        return time.time() + cls.offset


def now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(Clock.now()))


def go_int(text: str | None) -> int | None:
    """Grafana's lenient integer: Go's strconv.Atoi, None where it fails (callers default)."""
    try:
        return go_atoi(text) if text is not None else None
    except GoParseError:
        return None
