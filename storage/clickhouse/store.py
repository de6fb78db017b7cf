"""Log data on ClickHouse (`storage.backend: clickhouse`): the schema and its migrations,
the append path, and the reads the querier asks of a log store.

The ingester validates and prepares a push as for SQLite (`storage.entries.PreparedStream`);
here it becomes rows of `entries`, `streams` and `stream_labels`, written before the push
is acknowledged. Rollups follow by a materialized view. Exact duplicates are stored once,
as on SQLite: a row whose stream already holds a line at or after its timestamp is looked
up by the ordering key first.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from importlib import resources
from typing import Any, Callable, Sequence, TypeVar

from storage.clickhouse.client import Client, ClickHouseError, Target
from storage.clickhouse.index import StreamIndex, stream_id
from storage.clickhouse.reader import ClickHouseReader
from storage.clickhouse.removal import ClickHouseRemoval
from storage.entries import AppendResult, PreparedStream
from storage.streams import Matcher, TenantSet

T = TypeVar("T")
log = logging.getLogger("logstore.clickhouse")
RETRY_SECONDS = 5

_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")
ENTRY_COLUMNS = ("tenant", "stream_id", "ts", "hash", "seq", "line", "metadata")


def migration_files() -> list[tuple[int, str, str]]:
    folder = resources.files("storage.clickhouse") / "migrations"
    found = []
    for item in folder.iterdir():
        m = _MIGRATION.match(item.name)
        if m:
            found.append((int(m.group(1)), item.name, item.read_text()))
    return sorted(found)


class ClickHouseLogs:
    """The log store of one ClickHouse database."""

    def __init__(self, target: Target):
        self.target = target
        self.db = target.database
        self.client = Client(target)
        self.index = StreamIndex(self.client, self.db)
        self.removal = ClickHouseRemoval(self.client, self.db, self._forget)
        self._write_lock = threading.Lock()
        # stream id -> newest timestamp stored (None: not yet asked); a row newer than it
        # cannot be a duplicate
        self._newest: dict[int, int] = {}
        self._seq = 0
        self.available = False
        self._opener: asyncio.Task | None = None

    # -- lifetime --------------------------------------------------------------------------
    def open(self) -> list[str]:
        """Connect and bring the schema up to date; the names of the migrations applied."""
        self.client.open()
        on_cluster = f" ON CLUSTER {self.target.cluster}" if self.target.cluster else ""
        self.client.command(f"CREATE DATABASE IF NOT EXISTS {self.db}{on_cluster}")
        self.client.command(
            f"CREATE TABLE IF NOT EXISTS {self.db}.schema_version{on_cluster} "
            "(version UInt32, name String, applied DateTime DEFAULT now()) "
            "ENGINE = ReplacingMergeTree ORDER BY version")
        done = {r[0] for r in self.client.query(
            f"SELECT version FROM {self.db}.schema_version")}
        applied = []
        for version, name, sql in migration_files():
            if version in done:
                continue
            for statement in re.split(r"^;\s*$", sql, flags=re.M):
                text = "\n".join(line for line in statement.splitlines()
                                 if not line.strip().startswith("--")).strip()
                if text:
                    self.client.command(text.replace("{db}", self.db))
            self.client.insert(f"{self.db}.schema_version", ("version", "name"),
                               [(version, name)])
            applied.append(name)
        self.available = True
        return applied

    def close(self) -> None:
        self.available = False
        self.client.close()

    async def start(self) -> None:
        """Open now, or keep trying in the background: until ClickHouse answers, /ready and
        pushes say 503 (a node must come up before its database does)."""
        try:
            applied = await asyncio.to_thread(self.open)
        except ClickHouseError as exc:
            log.error("ClickHouse not reachable, retrying every %s s: %s", RETRY_SECONDS, exc)
            self._opener = asyncio.get_running_loop().create_task(self._keep_opening())
            return
        if applied:
            log.info("applied ClickHouse migrations: %s", ", ".join(applied))

    async def _keep_opening(self) -> None:
        while not self.available:
            await asyncio.sleep(RETRY_SECONDS)
            try:
                await asyncio.to_thread(self.open)
            except ClickHouseError as exc:
                log.warning("ClickHouse still not reachable: %s", exc)
        log.info("ClickHouse reachable again")

    async def stop(self) -> None:
        task, self._opener = self._opener, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        await asyncio.to_thread(self.close)

    # -- writes ----------------------------------------------------------------------------
    async def append(self, tenant: str, streams: list[PreparedStream]) -> AppendResult:
        return await asyncio.to_thread(self.append_sync, tenant, streams)

    def append_sync(self, tenant: str, streams: list[PreparedStream]) -> AppendResult:
        """Store the streams' rows; returns once ClickHouse has written them."""
        result = AppendResult()
        streams = [ps for ps in streams if ps.rows]
        if not streams:
            return result
        with self._write_lock:
            sids = [stream_id(tenant, ps.canonical) for ps in streams]
            self._learn_newest(tenant, sids)
            held = self._stored_keys(tenant, sids, streams)
            rows: list[tuple] = []
            seen: set[tuple[int, int, int]] = set()
            seq = max(time.time_ns(), self._seq + 1)
            new_streams: list[tuple[int, PreparedStream]] = []
            for sid, ps in zip(sids, streams):
                if sid not in self._newest:
                    new_streams.append((sid, ps))
                kept = []
                for ts, h, line, md in ps.rows:
                    key = (sid, ts, h)
                    if key in held or key in seen:
                        continue
                    seen.add(key)
                    kept.append((ts, h, line, md))
                    rows.append((tenant, sid, ts, h, seq, line, md or ""))
                    seq += 1
                result.written.append((sid, ps.labels, kept))
                result.firsts.append((sid, ps.first_ts))
            if new_streams:
                self.client.insert(f"{self.db}.stream_labels",
                                   ("tenant", "name", "value", "stream_id"),
                                   [(tenant, name, value, sid) for sid, ps in new_streams
                                    for name, value in ps.labels.items()])
            self.client.insert(f"{self.db}.streams",
                               ("tenant", "id", "labels", "first_ts", "last_ts"),
                               [(tenant, sid, ps.canonical, ps.first_ts, ps.last_ts)
                                for sid, ps in zip(sids, streams)])
            self.client.insert(f"{self.db}.entries", ENTRY_COLUMNS, rows)
            self._seq = seq
            for sid, ps in zip(sids, streams):
                self._newest[sid] = max(self._newest.get(sid, ps.last_ts), ps.last_ts)
            result.inserted = len(rows)
            result.duplicates = sum(len(ps.rows) for ps in streams) - len(rows)
        return result

    def _forget(self, sid: int) -> None:
        """A stream the compactor dropped: its next push creates it again."""
        with self._write_lock:
            self._newest.pop(sid, None)

    def _learn_newest(self, tenant: str, sids: list[int]) -> None:
        unknown = [sid for sid in sids if sid not in self._newest]
        if not unknown:
            return
        for sid, last in self.client.query(
                f"SELECT id, max(last_ts) FROM {self.db}.streams WHERE tenant = {{t:String}} "
                "AND id IN {ids:Array(UInt64)} GROUP BY id", {"t": tenant, "ids": unknown}):
            self._newest[sid] = last

    def _stored_keys(self, tenant: str, sids: list[int], streams: list[PreparedStream]
                     ) -> set[tuple[int, int, int]]:
        """(stream, ts, hash) already stored among the rows no newer than their stream's
        newest stored line (the only ones that can repeat one)."""
        older = {}
        for sid, ps in zip(sids, streams):
            newest = self._newest.get(sid)
            if newest is not None and ps.first_ts <= newest:
                older[sid] = (ps.first_ts, min(ps.last_ts, newest))
        if not older:
            return set()
        lo = min(a for a, _ in older.values())
        hi = max(b for _, b in older.values())
        return {tuple(r) for r in self.client.query(
            f"SELECT stream_id, ts, hash FROM {self.db}.entries WHERE tenant = {{t:String}} "
            "AND stream_id IN {ids:Array(UInt64)} AND ts >= {lo:Int64} AND ts <= {hi:Int64}",
            {"t": tenant, "ids": sorted(older), "lo": lo, "hi": hi})}

    # -- reads -----------------------------------------------------------------------------
    async def read(self, fn: Callable[[Any], T]) -> T:
        """fn(self) on a thread (the querier's reads hand it to `reader`)."""
        return await asyncio.to_thread(fn, self)

    def reader(self, conn: Any, deadline: float | None) -> ClickHouseReader:
        return ClickHouseReader(self.client, self.db, deadline)

    def label_names(self, inner: Any, tenant: str | TenantSet, start: int, end: int,
                    matchers: Sequence[Matcher] | None) -> list[str]:
        return self.index.label_names(tenant, start, end, matchers)

    def label_values(self, inner: Any, tenant: str | TenantSet, name: str, start: int,
                     end: int, matchers: Sequence[Matcher] | None) -> list[str]:
        return self.index.label_values(tenant, name, start, end, matchers)

    def series_json(self, inner: Any, tenant: str | TenantSet,
                    groups: Sequence[Sequence[Matcher]], start: int, end: int) -> list[str]:
        return self.index.series_json(tenant, groups, start, end)

    def new_entries(self, _conn: Any, after: int, limit: int) -> list[tuple]:
        """(seq, stream id, ts, line, metadata) of the rows stored after `after` (a seq),
        oldest first: what the pattern miner reads (its mark is a seq here)."""
        return [(seq, sid, ts, line, md or None) for seq, sid, ts, line, md in
                self.client.query(
                    f"SELECT seq, stream_id, ts, line, metadata FROM {self.db}.entries "
                    "WHERE seq > {after:UInt64} ORDER BY seq LIMIT {n:UInt32}",
                    {"after": after, "n": limit})]

    def newest_seq(self, _conn: Any = None) -> int:
        """The highest seq stored (0: none): the pattern miner's catch-up mark."""
        return self.client.query(f"SELECT max(seq) FROM {self.db}.entries")[0][0] or 0

    def rows(self) -> int:
        """Lines stored (merges not yet run may still hold a repeat twice)."""
        return self.client.query(f"SELECT count() FROM {self.db}.entries")[0][0]

    def size_bytes(self) -> int:
        rows = self.client.query(
            "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = {d:String} "
            "AND active", {"d": self.db})
        return int(rows[0][0] or 0) if rows else 0


__all__ = ["ClickHouseLogs", "ClickHouseError", "Target"]
