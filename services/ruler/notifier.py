"""Alert delivery to Alertmanager (v2 API), as Prometheus' notifier does it: a bounded queue
(`ruler.notification_queue_capacity`; when full the oldest alerts are dropped and counted),
batches of at most 64 alerts POSTed to every `ruler.alertmanager_url` with
`ruler.notification_timeout`, a few retries with backoff. Evaluation only appends to the
queue: an Alertmanager that is down or slow never holds up rules or pushes."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from services.runtime.base import cancel_task
from services.runtime.memory import importing_without

with importing_without():
    import httpx

log = logging.getLogger("logstore.notifier")
MAX_BATCH = 64
RETRIES = 3
BACKOFF_SECONDS = 0.2


class Notifier:
    def __init__(self, urls: list[str], capacity: int, timeout_ns: int):
        self.urls = [u.rstrip("/") for u in urls]
        self.capacity = capacity
        self.timeout = timeout_ns / 1e9
        self.queue: deque[dict[str, Any]] = deque()
        self.dropped = 0
        self.sent = {u: 0 for u in self.urls}
        self.errors = {u: 0 for u in self.urls}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task | None = None

    def send(self, alerts: list[dict[str, Any]]) -> None:
        """Queue alerts (never blocks); the oldest go when the queue is full."""
        if not alerts or not self.urls:
            return
        self.queue.extend(alerts)
        over = len(self.queue) - self.capacity
        for _ in range(max(0, over)):
            self.queue.popleft()
        if over > 0:
            self.dropped += over
            log.warning("alert notification queue full, dropped %d alerts", over)
        self._idle.clear()
        self._wake.set()

    async def drained(self) -> None:
        """Until every queued alert was delivered or given up on (tests, shutdown)."""
        await self._idle.wait()

    async def start(self) -> None:
        if self.urls:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="notifier")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_task(task)

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self.queue:
                    batch = [self.queue.popleft() for _ in range(min(MAX_BATCH,
                                                                     len(self.queue)))]
                    await asyncio.gather(*(self._post(client, url, batch)
                                           for url in self.urls))
                self._idle.set()

    async def _post(self, client: httpx.AsyncClient, url: str, batch: list[dict]) -> None:
        for attempt in range(RETRIES):
            try:
                r = await client.post(url + "/api/v2/alerts", json=batch)
                if r.status_code // 100 == 2:
                    self.sent[url] += len(batch)
                    return
                error = f"{r.status_code} {r.text[:200]}"
                if r.status_code // 100 == 4:
                    break  # the alerts themselves are refused: retrying will not help
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            if attempt + 1 < RETRIES:
                await asyncio.sleep(BACKOFF_SECONDS * 2 ** attempt)
        self.errors[url] += len(batch)
        log.warning("sending %d alerts to %s failed: %s", len(batch), url, error)
