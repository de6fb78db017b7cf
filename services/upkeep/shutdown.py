"""Flush and shutdown as Loki's ingester offers them (spec/http-api.md §12).

`prepare_shutdown` leaves a marker file in the data directory (Loki keeps its marker beside
the WAL): while it is there, the next stop seals the whole head before the database closes,
so a host that is going away leaves everything in blocks. The marker is removed once that
stop has done it.

`shutdown` flushes (seals the head) unless told not to, marks the services stopping (so
/ready answers 503 and pushes are refused), and, if `terminate`, asks the server process to
exit: `logstore serve` records its own pid in LOGSTORE_SERVE_PID for this; an app run any
other way (tests, an embedding program) is only stopped, never killed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

from services.runtime.base import ServiceRegistry, State
from services.ingest.ingester import STOPPING_TEXT, Ingester
from services.upkeep.sealer import Sealer

log = logging.getLogger("logstore.shutdown")

MARKER = "prepare-shutdown"
SERVE_PID_ENV = "LOGSTORE_SERVE_PID"


class ShutdownControl:
    def __init__(self, data_dir: str, states: ServiceRegistry, sealer: Sealer,
                 ingester: Ingester):
        self.marker = Path(data_dir) / MARKER
        self.states = states
        self.sealer = sealer
        self.ingester = ingester

    # -- prepare_shutdown ---------------------------------------------------------------------
    def prepared(self) -> bool:
        return self.marker.exists()

    def prepare(self) -> None:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        self.marker.write_text("set\n")

    def unprepare(self) -> None:
        self.marker.unlink(missing_ok=True)

    async def on_stop(self) -> None:
        """At every stop: seal the head first when a shutdown was prepared."""
        if self.prepared():
            sealed = await self.sealer.seal_due(everything=True)
            log.warning("prepared shutdown: sealed %d head rows", sealed)
            self.unprepare()

    # -- shutdown -----------------------------------------------------------------------------
    async def shutdown(self, flush: bool, terminate: bool) -> None:
        """Raises RuntimeError(STOPPING_TEXT) when already stopping."""
        if self.states.stopping or self.ingester.stopped:
            raise RuntimeError(STOPPING_TEXT)
        self.ingester.stopped = True
        self.states.stopping = True
        self.states["ingester"].set(State.STOPPING)
        if flush:
            await self.sealer.seal_due(everything=True)
        self.states["ingester"].set(State.TERMINATED)
        if terminate:
            pid = os.environ.get(SERVE_PID_ENV)
            if pid and pid.isdigit():
                # after this response has gone out: granian then stops its worker gracefully
                asyncio.get_running_loop().call_later(
                    0.05, os.kill, int(pid), signal.SIGTERM)
