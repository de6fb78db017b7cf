"""Session logins for the Grafana API, as Grafana's `POST /login` and `GET /logout` do them,
so a browser page can sign in once and keep no password (README "Session login").

A session is a random 256-bit token in an HttpOnly cookie (`grafana.login_cookie_name`,
default `logstore_session`: not Grafana's `grafana_session`, since browsers share cookies
across ports); the database keeps its SHA-256 only (the token is random, so a slow hash adds
nothing), so sessions survive a restart and a copy of the database signs nobody in. A
session ends at logout, when the user's password changes, `login_maximum_lifetime_duration`
after the login, or `login_maximum_inactive_lifetime_duration` after its last use (written
at most every TOUCH_SECONDS, so inactivity is measured to within that).

CSRF: a cookie goes with every request the browser makes to the site, whoever's page asks
for it, so a request the cookie alone authenticates may change nothing. Each session has a
CSRF token, an HMAC of the session token (so it is not stored, and the server can give it
again from the cookie): the login answer and `GET /api/user` hand it to the page, and it must
come back in the `X-Grafana-CSRF` header of every POST, PUT, PATCH and DELETE the cookie
authenticates. Another site's page can read neither answer nor set the header. Such a request
with an Origin header must also come from this host, as Grafana checks. Basic auth and tokens
are not cookies and need neither.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import sqlite3
from dataclasses import dataclass

from services.grafana.auth import user_caller
from services.grafana.common import Caller, Clock, GrafanaError, unauthorized
from storage.grafana import identity as ident
from storage.grafana import sessions as store

CSRF_HEADER = "X-Grafana-CSRF"
TOUCH_SECONDS = 300
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SESSION_ENDED = "Unauthorized: the session has ended; log in again"
CSRF_MISSING = (f"forbidden: a request signed in by the session cookie must carry the "
                f"session's CSRF token in the {CSRF_HEADER} header (from POST /login or "
                f"GET /api/user)")
ORIGIN_REFUSED = "origin not allowed"  # Grafana's text for a cross-origin cookie request


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def csrf_token(session_token: str) -> str:
    mac = hmac.new(session_token.encode(), b"logstore session csrf", hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class Lifetimes:
    maximum: int    # seconds after the login
    inactive: int   # seconds after the last use


@dataclass(frozen=True)
class NewSession:
    token: str
    csrf: str
    login: str


@dataclass(frozen=True)
class SessionCaller:
    caller: Caller
    csrf: str
    session_id: int
    stale: bool     # seen_at is older than TOUCH_SECONDS: the caller writes it anew


def open_session(conn: sqlite3.Connection, user: dict, lifetimes: Lifetimes) -> NewSession:
    """A new session for a user whose password was checked (a write: one transaction; the
    slow password check runs before it on a reader thread, not on the writer)."""
    now = int(Clock.now())
    store.delete_expired(conn, now - lifetimes.maximum, now - lifetimes.inactive)
    token = secrets.token_urlsafe(32)
    store.insert(conn, user["id"], digest(token), now)
    return NewSession(token, csrf_token(token), user["login"])


def resolve(conn: sqlite3.Connection, token: str, org_header: str | None,
            lifetimes: Lifetimes) -> SessionCaller:
    """The caller a session cookie proves, or a 401 GrafanaError (a read)."""
    found = store.by_token(conn, digest(token))
    now = int(Clock.now())
    if (found is None or found["created_at"] <= now - lifetimes.maximum
            or found["seen_at"] <= now - lifetimes.inactive):
        raise unauthorized(SESSION_ENDED)
    user = ident.user_by_id(conn, found["user_id"])
    if user is None or user["is_disabled"]:
        raise unauthorized(SESSION_ENDED)
    return SessionCaller(user_caller(conn, user, org_header), csrf_token(token), found["id"],
                         now - found["seen_at"] >= TOUCH_SECONDS)


def touch(conn: sqlite3.Connection, session_id: int) -> None:
    store.touch(conn, session_id, int(Clock.now()))


def close(conn: sqlite3.Connection, token: str) -> None:
    store.delete(conn, digest(token))


def check_csrf(session: SessionCaller, method: str, csrf_header: str | None,
               origin: str | None, host: str) -> None:
    """Refuse (403) a state-changing request the cookie authenticates without the session's
    CSRF token, or from another origin."""
    if method not in UNSAFE_METHODS:
        return
    if origin is not None and origin_host(origin) != host.lower():
        raise GrafanaError(403, ORIGIN_REFUSED)
    if not csrf_header or not hmac.compare_digest(csrf_header.encode(), session.csrf.encode()):
        raise GrafanaError(403, CSRF_MISSING)


def origin_host(origin: str) -> str:
    """`host[:port]` of an Origin header (`null` and garbage give ``)."""
    _, sep, rest = origin.strip().partition("://")
    return rest.split("/", 1)[0].lower() if sep else ""
