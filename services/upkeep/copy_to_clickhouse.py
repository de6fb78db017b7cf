"""`logstore copy-to-clickhouse`: a data directory's log data into `storage.clickhouse`, for
a user moving from SQLite to `storage.backend: clickhouse` (docs/scale-out.md).

Stream by stream, head and sealed blocks alike, in batches through the ClickHouse store's
own write path: a line already there is found by its key and not written again, so a run
that was interrupted is simply started again and goes on where it stopped. Progress goes
to stdout; at the end the lines of every tenant are counted on both sides, and the command
fails (exit 1) if they differ. The server must not run on the data directory meanwhile.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Iterator

from config import Config
from logql.errors import StoreUnavailable
from logql.model import parse_canonical
from services.ingest.prepare import entry_hashes
from storage import deletes as sqlite_rows
from storage.db import DB_FILENAME, connect
from storage.dir_lock import DataDirInUse, DataDirLock
from storage.entries import PreparedStream

# lines per write: large enough that ClickHouse makes few parts, small enough to keep the
# process's memory flat whatever a stream holds
BATCH_LINES = 50_000


def _stream_rows(conn, sid: int) -> list[tuple[int, int, str, str | None]]:
    """(id, ts, line, metadata) of a stream's every line, head and blocks, in (ts, id)
    order."""
    rows = list(conn.execute("SELECT id, ts, line, metadata FROM entries WHERE stream_id = ?",
                             (sid,)))
    for (block_id,) in conn.execute("SELECT id FROM blocks WHERE stream_id = ?",
                                    (sid,)).fetchall():
        rows.extend(sqlite_rows.block_rows(conn, block_id))
    rows.sort(key=lambda r: (r[1], r[0]))
    return rows


def _prepared(labels: dict[str, str], canonical: str,
              rows: list[tuple[int, int, str, str | None]]) -> PreparedStream:
    ps = PreparedStream(labels, canonical)
    hashes = entry_hashes([r[2].encode("utf-8", "surrogatepass") for r in rows],
                          [(r[3] or "").encode() for r in rows])
    ps.rows = [(ts, h, line, md) for (_, ts, line, md), h in zip(rows, hashes)]
    ps.first_ts, ps.last_ts = rows[0][1], rows[-1][1]
    return ps


def _batches(conn) -> Iterator[tuple[str, list[PreparedStream], int]]:
    """(tenant, prepared streams, lines) in batches of about BATCH_LINES lines."""
    batch: list[PreparedStream] = []
    tenant_of_batch, lines = None, 0
    for sid, tenant, canonical in conn.execute(
            "SELECT id, tenant, labels FROM streams ORDER BY tenant, id").fetchall():
        rows = _stream_rows(conn, sid)
        if not rows:
            continue
        if batch and (tenant != tenant_of_batch or lines + len(rows) > BATCH_LINES):
            yield tenant_of_batch, batch, lines
            batch, lines = [], 0
        labels = parse_canonical(canonical)
        for i in range(0, len(rows), BATCH_LINES):
            part = rows[i:i + BATCH_LINES]
            batch.append(_prepared(labels, canonical, part))
            lines += len(part)
            tenant_of_batch = tenant
            if lines >= BATCH_LINES:
                yield tenant, batch, lines
                batch, lines = [], 0
    if batch:
        yield tenant_of_batch, batch, lines


def _sqlite_counts(conn) -> dict[str, int]:
    out: dict[str, int] = {}
    for tenant, n in conn.execute(
            "SELECT s.tenant, count(*) FROM entries e JOIN streams s ON s.id = e.stream_id "
            "GROUP BY s.tenant"):
        out[tenant] = out.get(tenant, 0) + n
    for tenant, n in conn.execute(
            "SELECT s.tenant, sum(b.rows) FROM blocks b JOIN streams s ON s.id = b.stream_id "
            "GROUP BY s.tenant"):
        out[tenant] = out.get(tenant, 0) + n
    return out


def copy_to_clickhouse(cfg: Config, say: Callable[[str], None] = print) -> int:
    """The command; its exit code."""
    from storage.clickhouse.store import ClickHouseLogs, Target
    from storage.clickhouse.ttl import TtlPlan

    ch = cfg.storage.clickhouse
    if not ch.url:
        say("logstore: storage.clickhouse.url is not set: it names where to copy to")
        return 1
    path = os.path.join(cfg.data_dir, DB_FILENAME)
    if not os.path.exists(path):
        say(f"logstore: no database at {path}")
        return 1
    try:
        DataDirLock(cfg.data_dir).acquire()  # held until this process exits
    except DataDirInUse as exc:
        say(f"logstore: {exc}")
        return 1
    conn = connect(path, readonly=True)
    logs = ClickHouseLogs(Target(ch.url, ch.database, ch.user,
                                 os.environ.get(ch.password_env, ""), ch.cluster))
    try:
        logs.open()
        # lines a retention TTL has expired would be dropped as they go in, and the counts
        # differ: the compactor's next sweep puts the TTL back
        if logs.removal.set_ttl(TtlPlan(None, {})):
            say("took the tables' retention TTL away while copying (a node's compactor puts "
                "it back at its next sweep)")
        want = _sqlite_counts(conn)
        total = sum(want.values())
        say(f"copying {total:,} lines of {len(want)} tenant(s) from {path} to {ch.url}")
        done = written = 0
        began = time.monotonic()
        for tenant, streams, lines in _batches(conn):
            written += logs.append_sync(tenant, streams).inserted
            done += lines
            rate = done / max(time.monotonic() - began, 1e-9)
            say(f"{done:,}/{total:,} lines ({done * 100 // max(total, 1)}%), "
                f"{written:,} new, {rate:,.0f} lines/s")
        got = logs.tenant_counts()
        wrong = {t: (n, got.get(t, 0)) for t, n in want.items() if got.get(t, 0) != n}
        if wrong:
            for t, (n, m) in sorted(wrong.items()):
                say(f"logstore: tenant {t!r}: {n:,} lines in SQLite, {m:,} in ClickHouse")
            return 1
        say(f"verified: {total:,} lines in both, per tenant")
        if cfg.storage.shared.url and not _copy_shared(cfg, conn, say):
            return 1
        say("now set storage.backend: clickhouse")
        return 0
    except StoreUnavailable as exc:
        say(f"logstore: {exc} (run the command again to go on)")
        return 1
    finally:
        conn.close()
        logs.close()


def _copy_shared(cfg: Config, conn, say: Callable[[str], None]) -> bool:
    from services.upkeep.copy_shared import copy_shared
    from storage.shared.postgres import PostgresState

    shared = cfg.storage.shared
    state = PostgresState(shared.url, os.environ.get(shared.password_env, ""))
    try:
        state.open()
        say(f"copying the shared state (rules, delete requests, Grafana) to {shared.url}")
        return copy_shared(conn, state, say)
    finally:
        state.close()


def main_command(cfg: Config) -> int:
    return copy_to_clickhouse(cfg, lambda text: print(text, file=sys.stdout, flush=True))
