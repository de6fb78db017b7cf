"""Waiting for a server's background work before timing queries: the sealer (or, in builds
before issue 11, the FTS indexer) competing for the CPU would be measured with the queries."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

HOUR_NS = 3600 * 10**9
GRACE_NS = 120 * 10**9  # storage.seal_grace_period's default


def pending_rows(db: Path) -> int:
    """Rows the background work still has to do; -1 when this build has none."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "blocks" in tables:  # rows whose default one-hour window closed are due
            cutoff = time.time_ns() - GRACE_NS
            due_before = cutoff - cutoff % HOUR_NS
            pending = conn.execute("SELECT count(*) FROM entries WHERE ts < ?",
                                   (due_before,)).fetchone()[0]
            if conn.execute("SELECT 1 FROM schema_version WHERE version = 10").fetchone():
                # packs, the head since issue 25 (flagged 4)
                pending += conn.execute("SELECT coalesce(sum(rows), 0) FROM blocks "
                                        "WHERE flags & 4 AND min_ts < ?",
                                        (due_before,)).fetchone()[0]
            return pending
        if "fts_state" in tables:
            hw = conn.execute("SELECT indexed_through FROM fts_state").fetchone()[0]
            return conn.execute("SELECT count(*) FROM entries WHERE id > ?",
                                (hw,)).fetchone()[0]
        return -1
    finally:
        conn.close()


def wait_for_background(db: Path, timeout: float = 600) -> int:
    """Poll until nothing is pending; return what is left (0 caught up, -1 nothing to wait
    for)."""
    deadline = time.monotonic() + timeout
    pending = pending_rows(db)
    while pending > 0 and time.monotonic() < deadline:
        time.sleep(1)  # polling the service's progress, not synchronising on time
        pending = pending_rows(db)
    return pending


def data_range(db: Path) -> tuple[int, int]:
    """[oldest, newest + 1) of every stored entry, head or sealed."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        lo, hi = conn.execute("SELECT min(first_ts), max(last_ts) FROM streams").fetchone()
    finally:
        conn.close()
    return lo, hi + 1
