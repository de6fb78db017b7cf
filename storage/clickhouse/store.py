"""Log data on ClickHouse (`storage.backend: clickhouse`): the schema and its migrations,
the append path, and the reads the querier asks of a log store.

The ingester validates and prepares a push as for SQLite (`storage.entries.PreparedStream`);
here it becomes rows of `entries`, `streams` and `stream_labels`, written before the push
is acknowledged. Exact duplicates are stored once, as on SQLite: a row whose stream already
holds a line at or after its timestamp is looked up by the ordering key first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import re
import threading
import time
from collections import ChainMap
from importlib import resources
from typing import Any, Callable, ContextManager, Mapping, MutableMapping, Sequence, TypeVar

from logql.errors import StoreUnavailable
from logql.reading import utf8_len
from storage.clickhouse import cluster
from storage.clickhouse.client import UNREACHABLE, Client, ClickHouseError, Target
from storage.clickhouse.index import StreamIndex, stream_id
from storage.clickhouse.reader import ClickHouseReader
from storage.clickhouse.removal import ClickHouseRemoval
from storage.db import migrations_in, next_batch, settle
from storage.entries import AppendResult, PreparedStream
from storage.streams import Matcher, TenantSet

T = TypeVar("T")
log = logging.getLogger("logstore.clickhouse")
RETRY_SECONDS = 5

ENTRY_COLUMNS = ("tenant", "stream_id", "ts", "hash", "seq", "line", "metadata", "bytes",
                 "rule")


class LayoutMismatch(StoreUnavailable):
    """The database's tables are not of the layout the config asks for: the node does not
    start (app.py), as without its shared state."""


def migration_files() -> list[tuple[int, str, str]]:
    return migrations_in(resources.files("storage.clickhouse") / "migrations")


def migration_statements(sql: str, db: str) -> list[str]:
    """A migration file's statements (separated by lines holding only `;`), comments left
    out, for the database `db`."""
    out = []
    for statement in re.split(r"^;\s*$", sql, flags=re.M):
        text = "\n".join(line for line in statement.splitlines()
                         if not line.strip().startswith("--")).strip()
        if text:
            out.append(text.replace("{db}", db))
    return out


class ClickHouseLogs:
    """The log store of one ClickHouse database."""

    def __init__(self, target: Target,
                 migrating: Callable[[], ContextManager[Any]] = contextlib.nullcontext):
        self.target = target
        # held while migrating: nodes of a cluster that start together must not each run
        # a migration (0002's backfill twice would count every line twice)
        self.migrating = migrating
        self.db = target.database
        self.client = Client(target)
        self.index = StreamIndex(self.client, self.db)
        self.removal = ClickHouseRemoval(self.client, self.db, self._forget, target.cluster)
        self._write_lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._writer: threading.Thread | None = None
        self._writer_start = threading.Lock()
        # stream id -> newest timestamp stored (None: not yet asked); a row newer than it
        # cannot be a duplicate
        self._newest: dict[int, int] = {}
        self._seq = 0
        # `rule_of(tenant, labels)`: the number of the retention_stream rule a stream's
        # lines are stored under (RetentionPolicy.rule_of), for the tables' TTL; 0 without
        self.rule_of: Callable[[str, dict[str, str]], int] | None = None
        self.available = False
        self._opener: asyncio.Task | None = None

    # -- lifetime --------------------------------------------------------------------------
    def open(self) -> list[str]:
        """Connect and bring the schema up to date; the names of the migrations applied.
        LayoutMismatch when the tables are of the other layout (one server, or a cluster)
        than the config asks for."""
        self.client.open()
        with self.migrating():
            self._check_layout()
            applied = self._migrate()
        self.available = True
        return applied

    def _check_layout(self) -> None:
        """Tables made for one server are never turned into a cluster's, nor the other way:
        the migrations are done (nothing would create the other form), and a DELETE would
        name tables that are not there."""
        rows = self.client.query(
            "SELECT engine FROM system.tables WHERE database = {d:String} AND name = 'entries'",
            {"d": self.db})
        if not rows:
            return  # a new database: created in the configured layout
        distributed = rows[0][0] == "Distributed"
        if self.target.cluster and not distributed:
            raise LayoutMismatch(
                f"the tables of ClickHouse database {self.db} were made for one server, "
                f"and storage.clickhouse.cluster is {self.target.cluster}: use a new "
                "database for the cluster and copy the lines into it "
                "(logstore copy-to-clickhouse from a SQLite data directory)")
        if distributed and not self.target.cluster:
            raise LayoutMismatch(
                f"the tables of ClickHouse database {self.db} were made for a cluster: set "
                "storage.clickhouse.cluster to its name")

    def _migrate(self) -> list[str]:
        on_cluster = f" ON CLUSTER {self.target.cluster}" if self.target.cluster else ""
        self.client.command(f"CREATE DATABASE IF NOT EXISTS {self.db}{on_cluster}")
        self.client.command(cluster.schema_version_table(self.db, self.target.cluster))
        done = {r[0] for r in self.client.query(
            f"SELECT version FROM {self.db}.schema_version")}
        applied = []
        for version, name, sql in migration_files():
            if version in done:
                continue
            for text in migration_statements(sql, self.db):
                for command in cluster.statements(text, self.target.cluster):
                    self.client.command(command)
            self.client.insert(f"{self.db}.schema_version", ("version", "name"),
                               [(version, name)])
            applied.append(name)
        return applied

    def close(self) -> None:
        self.available = False
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join()
            self._writer = None
            self._queue = queue.Queue()
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
            except StoreUnavailable as exc:  # ClickHouse, or the lock its migrations take
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
        """Store the streams' rows; returns once ClickHouse has written them. Pushes that
        arrive while a write runs go together into the next one (group commit: one insert
        per table for all of them, so ClickHouse makes a part per batch, not per push)."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queue.put((tenant, streams, future, asyncio.get_running_loop()))
        self._ensure_writer()
        return await future

    def append_sync(self, tenant: str, streams: list[PreparedStream]) -> AppendResult:
        """append() for callers without an event loop (tests, tools)."""
        with self._write_lock:
            return self._write([(tenant, streams)])[0]

    def _ensure_writer(self) -> None:
        with self._writer_start:
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop,
                                                name="clickhouse-writer", daemon=True)
                self._writer.start()

    def _write_loop(self) -> None:
        stop = False
        while not stop:
            batch, stop = next_batch(self._queue, None)
            if not batch:
                continue
            try:
                with self._write_lock:
                    results: list[Any] = self._write([(t, st) for t, st, _, _ in batch])
                ok = True
            except Exception as exc:  # noqa: BLE001 - handed to every caller of the batch
                results, ok = [exc] * len(batch), False
            for (_, _, future, loop), value in zip(batch, results):
                settle(future, loop, ok, value)

    def _write(self, pushes: list[tuple[str, list[PreparedStream]]]) -> list[AppendResult]:
        """Rows of every push, deduplicated against what is stored and against each other,
        in one insert per table; the caller holds the write lock."""
        results = []
        entries: list[tuple] = []
        stream_rows: list[tuple] = []
        postings: list[tuple] = []
        seen: set[tuple[int, int, int]] = set()
        # what this batch learns, over what the writer knew (a copy of thousands of streams
        # per batch would cost more than the batch)
        learned: dict[int, int] = {}
        newest = ChainMap(learned, self._newest)
        seq = max(time.time_ns(), self._seq + 1)
        for tenant, streams in pushes:
            result = AppendResult()
            results.append(result)
            streams = [ps for ps in streams if ps.rows]
            if not streams:
                continue
            sids = [stream_id(tenant, ps.canonical) for ps in streams]
            self._learn_newest(tenant, sids, newest)
            held = self._stored_keys(tenant, sids, streams, newest)
            for sid, ps in zip(sids, streams):
                if sid not in newest:
                    postings.extend((tenant, name, value, sid)
                                    for name, value in ps.labels.items())
                rule = self.rule_of(tenant, ps.labels) if self.rule_of is not None else 0
                kept = []
                for ts, h, line, md in ps.rows:
                    key = (sid, ts, h)
                    if key in held or key in seen:
                        continue
                    seen.add(key)
                    kept.append((ts, h, line, md))
                    entries.append((tenant, sid, ts, h, seq, line, md or "", utf8_len(line),
                                    rule))
                    seq += 1
                stream_rows.append((tenant, sid, ps.canonical, ps.first_ts, ps.last_ts,
                                    [rule]))
                newest[sid] = max(newest.get(sid, ps.last_ts), ps.last_ts)
                result.inserted += len(kept)
                result.duplicates += len(ps.rows) - len(kept)
                result.written.append((sid, ps.labels, kept))
                result.firsts.append((sid, ps.first_ts))
        # postings before the streams and lines they lead to: a reader never finds a line
        # whose stream no matcher can select
        self.client.insert(f"{self.db}.stream_labels", ("tenant", "name", "value", "stream_id"),
                           postings)
        self.client.insert(f"{self.db}.streams", ("tenant", "id", "labels", "first_ts",
                                                  "last_ts", "rules"), stream_rows)
        self.client.insert(f"{self.db}.entries", ENTRY_COLUMNS, entries)
        # only once everything is written: a failed batch leaves the writer's knowledge as
        # it was, and a retried push writes the new streams' postings again
        self._newest.update(learned)
        self._seq = seq
        return results

    def _forget(self, sid: int) -> None:
        """A stream the compactor dropped: its next push creates it again."""
        with self._write_lock:
            self._newest.pop(sid, None)

    def _learn_newest(self, tenant: str, sids: list[int], newest: MutableMapping[int, int]
                      ) -> None:
        unknown = [sid for sid in sids if sid not in newest]
        if not unknown:
            return
        for sid, last in self.client.query(
                f"SELECT id, max(last_ts) FROM {self.db}.streams WHERE tenant = {{t:String}} "
                "AND id IN {ids:Array(UInt64)} GROUP BY id", {"t": tenant, "ids": unknown}):
            newest[sid] = last

    def _stored_keys(self, tenant: str, sids: list[int], streams: list[PreparedStream],
                     newest_of: Mapping[int, int]) -> set[tuple[int, int, int]]:
        """(stream, ts, hash) already stored among the rows no newer than their stream's
        newest stored line (the only ones that can repeat one)."""
        older = {}
        for sid, ps in zip(sids, streams):
            newest = newest_of.get(sid)
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

    def compact(self) -> None:
        """Merge every table's parts now (/flush): what merges would do in time, lines
        pushed twice by two nodes collapsed with them (the rollups keep counting such a
        line twice: docs/scale-out.md), each rollup key summed to one row, and keys
        whose lines were all deleted gone."""
        for table in ("entries", "streams", "stream_labels", "rollups"):
            self.client.command(
                f"OPTIMIZE TABLE {cluster.changing(self.db, table, self.target.cluster)} FINAL")

    def tenant_counts(self) -> dict[str, int]:
        """Lines stored per tenant."""
        return dict(self.client.query(
            f"SELECT tenant, count() FROM {self.db}.entries GROUP BY tenant"))

    async def probe(self) -> str | None:
        """Asks the server (/ready): a ClickHouse lost while running is seen here, not only
        by the next push or read."""
        if not self.available:
            return UNREACHABLE
        try:
            await asyncio.to_thread(self.client.query, "SELECT 1")
        except ClickHouseError:
            return UNREACHABLE
        return None

    def rows(self) -> int:
        """Lines stored (merges not yet run may still hold a repeat twice)."""
        return self.client.query(f"SELECT count() FROM {self.db}.entries")[0][0]

    def size_bytes(self) -> int:
        # on a cluster, one replica of each shard
        parts = f"cluster({self.target.cluster}, system.parts)" if self.target.cluster \
            else "system.parts"
        rows = self.client.query(
            f"SELECT sum(bytes_on_disk) FROM {parts} WHERE database = {{d:String}} "
            "AND active", {"d": self.db})
        return int(rows[0][0] or 0) if rows else 0


__all__ = ["ClickHouseLogs", "ClickHouseError", "Target"]
