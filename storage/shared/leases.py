"""Leases for work that must run once per cluster, not once per node: the ruler's
evaluations, the compactor (retention and delete requests), the pattern miner.

`LocalLeases` is the one node over its own data directory (the directory lock already makes
it the only one): it holds every lease. `SharedLeases` keeps them in the shared state's
`leases` table: a node holds a lease while its row names it and has not expired, renews it
whenever it asks again, and another node takes it over once it expired (a node that died
gives its work up after `LEASE_SECONDS`; one that stops gives it up at once). Expiry is
judged by PostgreSQL's clock, so nodes' clocks need not agree."""

from __future__ import annotations

import os
import secrets
import socket
import time
from typing import Any

LEASE_SECONDS = 15.0
# a lease renewed this recently is held without asking PostgreSQL again
RENEW_AFTER = LEASE_SECONDS / 3

_TAKE = ("INSERT INTO leases (name, holder, expires_at) "
         "VALUES (?, ?, extract(epoch FROM clock_timestamp()) + ?) "
         "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
         "expires_at = excluded.expires_at "
         "WHERE leases.holder = excluded.holder "
         "OR leases.expires_at < extract(epoch FROM clock_timestamp()) "
         "RETURNING holder")


def node_name() -> str:
    """This process, unique in the cluster: host, pid and a random part (a pid is reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class LocalLeases:
    node = "local"

    async def holds(self, name: str) -> bool:
        return True

    async def release_all(self) -> None:
        pass


class SharedLeases:
    def __init__(self, state: Any, node: str | None = None,
                 seconds: float = LEASE_SECONDS) -> None:
        self.state = state
        self.node = node or node_name()
        self.seconds = seconds
        self._renewed: dict[str, float] = {}  # name -> time.monotonic() of the last renewal

    async def holds(self, name: str) -> bool:
        """Whether this node does the work called `name` now (taking or renewing the lease)."""
        last = self._renewed.get(name)
        if last is not None and time.monotonic() - last < min(RENEW_AFTER, self.seconds / 3):
            return True
        asked = time.monotonic()
        row = await self.state.write(lambda conn: conn.execute(
            _TAKE, (name, self.node, self.seconds)).fetchone())
        if row is None:
            self._renewed.pop(name, None)
            return False
        self._renewed[name] = asked
        return True

    async def release_all(self) -> None:
        """On stop: another node takes the work over without waiting for expiry."""
        self._renewed.clear()
        await self.state.write(lambda conn: conn.execute(
            "DELETE FROM leases WHERE holder = ?", (self.node,)))

    def held(self) -> list[str]:
        return sorted(self._renewed)
