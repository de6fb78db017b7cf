"""Who is calling: HTTP Basic for users, `Bearer glsa_...` for service-account tokens.

Passwords are stored as PBKDF2-SHA256 with a random salt; token secrets as SHA-256 (they
are 32 random characters, so a slow hash adds nothing). A verified password is remembered
in memory under a keyed digest so a client sending Basic auth on every request does not pay
the PBKDF2 cost each time; the memory entry is only valid while the stored hash is unchanged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import sqlite3
import string
import threading
import uuid
import zlib

from services.grafana.common import ORG_ID, ORG_NAME, Caller, Clock, now_text, unauthorized
from storage.grafana import identity as ident

# OWASP's figure for PBKDF2-HMAC-SHA256; a stored hash records its rounds, so hashes made
# with fewer still verify
PBKDF2_ITERATIONS = 600_000
# the first admin's generated password holds 144 random bits: rounds add nothing to that, and
# every fresh data directory would pay for them at start
GENERATED_PASSWORD_ITERATIONS = 100_000
BAD_CREDENTIALS = "Invalid username or password"  # also what login limiting counts
_ALNUM = string.ascii_letters + string.digits
_TOKEN = re.compile(r"^glsa_([A-Za-z0-9]{32})_([0-9a-f]{8})$")
_PEPPER = secrets.token_bytes(32)  # keys the in-memory cache of verified passwords
_verified: dict[tuple[str, bytes], str] = {}
_verified_lock = threading.Lock()
_VERIFIED_MAX = 1024


# -- secrets ---------------------------------------------------------------------------------
def hash_password(password: str, iterations: int = PBKDF2_ITERATIONS) -> str:
    salt = secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), iterations)
    return f"pbkdf2_sha256${iterations}${salt}${digest.hex()}"


def check_password(password: str, stored: str) -> bool:
    try:
        scheme, iterations, salt, hexdigest = stored.split("$")
    except ValueError:
        return False
    if scheme != "pbkdf2_sha256":
        return False
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), int(iterations))
    return hmac.compare_digest(digest.hex(), hexdigest)


def new_token() -> str:
    """`glsa_` + 32 alphanumerics + `_` + CRC-32 of the prefix as little-endian hex."""
    body = "glsa_" + "".join(secrets.choice(_ALNUM) for _ in range(32))
    return body + "_" + zlib.crc32(body.encode()).to_bytes(4, "little").hex()


def token_digest(token: str) -> str | None:
    """The stored hash of a well-formed token, None when its shape or checksum is wrong."""
    m = _TOKEN.match(token)
    if not m:
        return None
    body = "glsa_" + m.group(1)
    if zlib.crc32(body.encode()).to_bytes(4, "little").hex() != m.group(2):
        return None
    return hashlib.sha256(m.group(1).encode()).hexdigest()


def new_uid() -> str:
    return uuid.uuid4().hex[:14]


# -- authentication ----------------------------------------------------------------------------
def parse_authorization(header: str | None) -> tuple[str, str, str] | None:
    """('basic', login, password) or ('bearer', token, '') or None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer" and value:
        return ("bearer", value, "")
    if scheme.lower() == "basic" and value:
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return ("invalid", "", "")
        login, sep, password = decoded.partition(":")
        if not sep:
            return ("invalid", "", "")
        if login == "api_key":
            return ("bearer", password, "")
        return ("basic", login, password)
    return ("invalid", "", "")


def authenticate(conn: sqlite3.Connection, header: str | None, org_header: str | None) -> Caller:
    """The caller a request's headers prove, or a 401 GrafanaError. Runs on a reader thread."""
    parsed = parse_authorization(header)
    if parsed is None:
        raise unauthorized()
    kind, first, second = parsed
    if kind == "bearer":
        digest = token_digest(first)
        if digest is None:
            raise unauthorized("Invalid API key")
        row = ident.token_by_hash(conn, digest)
        if row is None or row["is_disabled"]:
            raise unauthorized("Invalid API key")
        if row["expires"] is not None and row["expires"] <= Clock.now():
            raise unauthorized("API key expired")
        org_id = row["org_id"]
        if org_header is not None and org_header.strip() != str(org_id):
            raise unauthorized("Invalid API key")
        return _caller(conn, row["user_id"], row["login"], org_id, False, True)
    if kind != "basic":
        raise unauthorized()
    return user_caller(conn, password_user(conn, first, second), org_header)


def password_user(conn: sqlite3.Connection, login: str, password: str) -> dict:
    """The enabled user a login (or email) and password prove, or a 401 GrafanaError: the
    one check behind Basic auth and POST /login."""
    user = ident.user_by_login_or_email(conn, login)
    if user is None or user["is_disabled"] or not _password_ok(login, password,
                                                              user["password_hash"]):
        raise unauthorized(BAD_CREDENTIALS)
    return user


def user_caller(conn: sqlite3.Connection, user: dict, org_header: str | None) -> Caller:
    """A signed-in user as the caller, in their current org or the X-Grafana-Org-Id one."""
    org_id = user["org_id"]
    if org_header is not None and org_header.strip():
        try:
            org_id = int(org_header.strip())
        except ValueError:
            raise unauthorized() from None
    return _caller(conn, user["id"], user["login"], org_id, bool(user["is_admin"]), False)


def _caller(conn: sqlite3.Connection, user_id: int, login: str, org_id: int,
            is_admin: bool, is_sa: bool) -> Caller:
    role = ident.org_role(conn, org_id, user_id)
    if role is None:
        raise unauthorized("User is not a member of the organization")
    return Caller(user_id=user_id, login=login, org_id=org_id, role=role,
                  is_server_admin=is_admin, is_service_account=is_sa,
                  team_ids=ident.team_ids_of(conn, user_id))


def _password_ok(login: str, password: str, stored: str) -> bool:
    if not stored:
        return False
    key = (login, hmac.new(_PEPPER, password.encode(), hashlib.sha256).digest())
    with _verified_lock:
        if _verified.get(key) == stored:
            return True
    if not check_password(password, stored):
        return False
    with _verified_lock:
        if len(_verified) >= _VERIFIED_MAX:
            _verified.clear()
        _verified[key] = stored
    return True


# -- first start -------------------------------------------------------------------------------
def bootstrap(conn: sqlite3.Connection, login: str, password: str,
              iterations: int = PBKDF2_ITERATIONS) -> bool:
    """Create org 1 and the initial admin when there are no users yet. True when created."""
    now = now_text()
    ident.ensure_org(conn, ORG_ID, ORG_NAME, now)
    if ident.count_users(conn):
        return False
    ident.insert_user(conn, uid=new_uid(), login=login, email="", name=login,
                      password_hash=hash_password(password, iterations), is_admin=True,
                      is_service_account=False, org_id=ORG_ID, role="Admin", now=now)
    return True
