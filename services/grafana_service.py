"""The Grafana API's service: who the caller is (with brute-force login limiting) and the
initial admin created at the first start.
"""

from __future__ import annotations

import logging
import secrets
import sys
from typing import Any, Callable, TypeVar

from config import GrafanaConfig
from services.grafana_auth import BAD_CREDENTIALS, authenticate, bootstrap, parse_authorization
from services.grafana_common import Caller, GrafanaError
from services.login_attempts import BLOCKED_TEXT, LoginAttempts
from storage.db import Database

log = logging.getLogger("logstore.grafana")
T = TypeVar("T")


class GrafanaService:
    def __init__(self, db: Database, cfg: GrafanaConfig):
        self.db = db
        self.cfg = cfg
        self.login_attempts = LoginAttempts(
            cfg.brute_force_login_protection_max_attempts,
            enabled=not cfg.disable_brute_force_login_protection)

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.db.write(lambda conn: fn(conn, *args))

    # -- lifespan --------------------------------------------------------------------------
    async def start(self) -> None:
        """Create org 1 and the initial admin when there are no users yet."""
        login, password = self.cfg.admin_user, self.cfg.admin_password
        generated = not password
        if generated:
            password = secrets.token_urlsafe(18)
        created = await self._write(bootstrap, login, password)
        if created and generated:
            # shown once: the database keeps only a hash
            print(f"logstore: created the Grafana API admin. Log in with user "
                  f"'{login}' and password '{password}' (HTTP Basic auth on /api/...). "
                  "This password is shown only now; change it with PUT /api/user/password.",
                  file=sys.stderr, flush=True)
        elif created:
            log.info("created the Grafana API admin %r with the configured password", login)

    # -- the caller --------------------------------------------------------------------------
    async def caller(self, header: str | None, org_header: str | None, address: str) -> Caller:
        """Who the Authorization header proves, or a 401/429 GrafanaError; failed Basic
        logins count against the login and the client address."""
        parsed = parse_authorization(header)
        login = parsed[1] if parsed is not None and parsed[0] == "basic" else None
        if login is None:
            return await self.db.read(authenticate, header, org_header)
        attempts = self.login_attempts
        if attempts.blocked(login, address):
            raise GrafanaError(429, BLOCKED_TEXT)
        try:
            caller = await self.db.read(authenticate, header, org_header)
        except GrafanaError as exc:
            if exc.message == BAD_CREDENTIALS:
                attempts.failed(login, address)
            raise
        attempts.succeeded(login)
        return caller

