"""Recording rule results to Prometheus-compatible receivers (remote-write 1.0: snappy-
compressed protobuf `WriteRequest`s), one sender per `ruler.remote_write.clients.<name>`.

Samples are first written to SQLite (`remote_write_buffer`), so none is lost while a
receiver is down or across a restart; each sender sends the oldest in batches of
`max_samples_per_send` (one tenant per request, its id in `X-Scope-OrgID` as Loki sends it)
and deletes them once the receiver answered 2xx. A 5xx, 429 or a connection failure is
retried with backoff (up to 30 s between tries); a 4xx means the receiver will never take
those samples, so they are dropped and counted. Beyond `max_buffered_samples` per client the
oldest buffered samples are dropped and counted. Nodes sharing the buffer (storage.shared.url)
send from it only while `sends()`: on the node that evaluates the rules."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any, Callable

import snappy

from proto import remote_pb2
from services.runtime.base import cancel_task
from services.runtime.memory import importing_without
from storage import rules as store

with importing_without():
    import httpx

log = logging.getLogger("logstore.remote_write")
MIN_BACKOFF, MAX_BACKOFF = 0.05, 30.0
IDLE_SECONDS = 5.0


def write_request(samples: list[tuple[dict[str, str], int, float]]) -> bytes:
    """A snappy-compressed WriteRequest; samples of one series go together, in time order."""
    series: dict[tuple, list[tuple[int, float]]] = {}
    for labels, ts, value in samples:
        series.setdefault(tuple(sorted(labels.items())), []).append((ts, value))
    req = remote_pb2.WriteRequest()
    for labels, points in series.items():
        ts_msg = req.timeseries.add()
        for name, value in labels:
            ts_msg.labels.add(name=name, value=value)
        for ts, value in sorted(points):
            ts_msg.samples.add(value=value, timestamp=ts)
    return snappy.compress(req.SerializeToString())


class RemoteWriter:
    def __init__(self, db: Any, cfg: Any, sends: Callable[[], bool] = lambda: True):
        self.db = db
        self.sends = sends
        self.cfg = cfg
        self.clients = dict(cfg.clients) if cfg.enabled else {}
        self.sent = {name: 0 for name in self.clients}
        self.failed = {name: 0 for name in self.clients}
        self.dropped = {name: 0 for name in self.clients}
        self.retries = {name: 0 for name in self.clients}
        self._wake = {name: asyncio.Event() for name in self.clients}
        self._tasks: list[asyncio.Task] = []

    @property
    def enabled(self) -> bool:
        return bool(self.clients)

    async def enqueue(self, tenant: str, samples: list[tuple[dict[str, str], int, float]]) -> None:
        """Buffer samples (labels with __name__, ts in ms, value) for every client."""
        if not self.clients or not samples:
            return
        names = list(self.clients)
        dropped = await self.db.write(lambda conn: store.buffer_samples(
            conn, names, tenant, samples, self.cfg.max_buffered_samples))
        if dropped:
            per = dropped // len(names)
            for name in names:
                self.dropped[name] += per
        for event in self._wake.values():
            event.set()

    async def buffered(self) -> dict[str, int]:
        return await self.db.read(store.buffered)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for name, client in self.clients.items():
            self._tasks.append(loop.create_task(self._run(name, client),
                                                name=f"remote-write-{name}"))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            await cancel_task(task)

    async def _run(self, name: str, client: Any) -> None:
        headers = {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
                   "X-Prometheus-Remote-Write-Version": "0.1.0",
                   "User-Agent": "logstore-ruler", **client.headers}
        if client.basic_auth is not None:
            token = f"{client.basic_auth.username}:{client.basic_auth.password}"
            headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        backoff = MIN_BACKOFF
        async with httpx.AsyncClient(timeout=client.remote_timeout / 1e9) as http:
            while True:
                rows = await self.db.read(store.oldest_samples, name,
                                          self.cfg.max_samples_per_send) \
                    if self.sends() else []
                if not rows:
                    self._wake[name].clear()
                    try:
                        async with asyncio.timeout(IDLE_SECONDS):  # wait_for can swallow a cancel
                            await self._wake[name].wait()
                    except TimeoutError:
                        pass
                    continue
                tenant = rows[0][1]
                batch = [r for r in rows if r[1] == tenant]
                body = write_request([(json.loads(r[2]), r[3], r[4]) for r in batch])
                send_headers = dict(headers)
                if self.cfg.add_org_id_header:
                    send_headers["X-Scope-OrgID"] = tenant
                outcome = await self._post(http, client.url, body, send_headers)
                if outcome == "retry":
                    self.retries[name] += 1
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF)
                    continue
                backoff = MIN_BACKOFF
                ids = [r[0] for r in batch]
                await self.db.write(lambda conn: store.forget_samples(conn, name, ids))
                if outcome == "sent":
                    self.sent[name] += len(batch)
                else:
                    self.failed[name] += len(batch)

    async def _post(self, http: httpx.AsyncClient, url: str, body: bytes,
                    headers: dict[str, str]) -> str:
        try:
            r = await http.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("remote write to %s failed, will retry: %s: %s", url,
                        type(exc).__name__, exc)
            return "retry"
        if r.status_code // 100 == 2:
            return "sent"
        if r.status_code == 429 or r.status_code // 100 == 5:
            log.warning("remote write to %s answered %d, will retry", url, r.status_code)
            return "retry"
        log.error("remote write to %s refused %d: %s; samples dropped", url, r.status_code,
                  r.text[:200])
        return "refused"
