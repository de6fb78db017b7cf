"""Leases for work that must run once per cluster, not once per node: the ruler's
evaluations ("ruler"), the compactor's sweeps ("compactor"), the pattern miner
("pattern-miner").

`LocalLeases` is the one node over its own data directory (the directory lock already makes
it the only one): it holds every lease. `SharedLeases` keeps them in the shared state's
`leases` table: a node holds a lease while its row names it and has not expired. Once taken,
a lease is renewed in the background every third of `LEASE_SECONDS` until the node stops, so
the work stays where its in-memory state is (the ruler's alerts, the miner's templates) and a
long compactor sweep keeps it. Another node takes it over once it expired: a node that died
gives its work up after `LEASE_SECONDS`, one that stops (`release_all`) at once. Expiry is
judged by PostgreSQL's clock, so nodes' clocks need not agree."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from typing import Any

from logql.errors import StoreUnavailable

log = logging.getLogger("logstore.leases")

LEASE_SECONDS = 15.0

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
        # name -> time.monotonic() before the last renewal PostgreSQL granted; trusted for
        # two thirds of the lease, so a renewal that failed stops the work before the lease
        # runs out and another node may start it
        self._renewed: dict[str, float] = {}
        # name -> when another node was found holding it: not asked again for a third of the
        # lease, however often a push wakes the pattern miner of a node that does not mine
        self._refused: dict[str, float] = {}
        self._keeper: asyncio.Task | None = None

    async def holds(self, name: str) -> bool:
        """Whether this node does the work called `name` now (taking the lease if free)."""
        now = time.monotonic()
        renewed = self._renewed.get(name)
        if renewed is not None and now - renewed < self.seconds * 2 / 3:
            return True
        refused = self._refused.get(name)
        if refused is not None and now - refused < self.seconds / 3:
            return False
        return await self._take(name)

    async def _take(self, name: str) -> bool:
        asked = time.monotonic()
        row = await self.state.write(lambda conn: conn.execute(
            _TAKE, (name, self.node, self.seconds)).fetchone())
        if row is None:
            self._renewed.pop(name, None)
            self._refused[name] = asked
            return False
        self._renewed[name] = asked
        self._refused.pop(name, None)
        if self._keeper is None:
            self._keeper = asyncio.get_running_loop().create_task(self._keep(),
                                                                  name="leases")
        return True

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self.seconds / 3)
            for name in list(self._renewed):
                try:
                    await self._take(name)
                except Exception as exc:  # noqa: BLE001 - PostgreSQL away: holds() says so
                    log.warning("renewing the %s lease failed: %s", name, exc)

    async def release_all(self) -> None:
        """On stop: another node takes the work over without waiting for expiry."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        self._renewed.clear()
        try:
            await self.state.write(lambda conn: conn.execute(
                "DELETE FROM leases WHERE holder = ?", (self.node,)))
        except StoreUnavailable as exc:
            # stopping goes on: the leases expire by themselves
            log.warning("could not release the leases, they expire in %s s: %s",
                        self.seconds, exc)

    def held(self) -> list[str]:
        """The leases this node holds now (renewed within the time it trusts them)."""
        now = time.monotonic()
        return sorted(n for n, at in self._renewed.items() if now - at < self.seconds * 2 / 3)
