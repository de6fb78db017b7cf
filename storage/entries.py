"""Appending log entries (writer thread) and keeping the per-minute rollups in step."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from storage.streams import extend_stream_range, get_or_create_stream

MINUTE_NS = 60 * 10**9


@dataclass
class PreparedStream:
    """Entries of one stream that passed validation, ready for one executemany."""
    labels: dict[str, str]
    canonical: str
    # (ts, hash, line, metadata_json_or_None)
    rows: list[tuple[int, int, str, str | None]] = field(default_factory=list)
    first_ts: int = 0
    last_ts: int = 0


@dataclass
class AppendResult:
    inserted: int = 0
    duplicates: int = 0
    # (stream id, canonical labels, labels, rows actually offered) per stream: for live tail
    written: list[tuple[int, dict[str, str], list[tuple[int, int, str, str | None]]]] = \
        field(default_factory=list)


INSERT_ENTRY = ("INSERT OR IGNORE INTO entries (stream_id, ts, hash, line, metadata) "
                "VALUES (?, ?, ?, ?, ?)")
# Tallies of the rows this append inserted (ids above the previous maximum: duplicates that
# INSERT OR IGNORE skipped are not among them), folded into the rollups by SQLite itself.
# The minute is floored, also for timestamps before 1970.
ROLLUP_NEW_ROWS = (
    "INSERT INTO rollups (stream_id, minute, metadata, lines, bytes) "
    "SELECT stream_id, ts - ((ts % ?1) + ?1) % ?1, coalesce(metadata, ''), count(*), "
    "sum(length(CAST(line AS BLOB))) FROM entries NOT INDEXED WHERE id > ?2 GROUP BY 1, 2, 3 "
    "ON CONFLICT (stream_id, minute, metadata) DO UPDATE "
    "SET lines = lines + excluded.lines, bytes = bytes + excluded.bytes")


def append(conn: sqlite3.Connection, cache: dict, tenant: str,
           streams: list[PreparedStream]) -> AppendResult:
    result = AppendResult()
    newest_before = conn.execute("SELECT coalesce(max(id), 0) FROM entries").fetchone()[0]
    for ps in streams:
        if not ps.rows:
            continue
        sid = get_or_create_stream(conn, cache, tenant, ps.labels, ps.canonical, ps.first_ts)
        before = conn.total_changes
        conn.executemany(INSERT_ENTRY, [(sid, ts, h, line, md) for ts, h, line, md in ps.rows])
        inserted = conn.total_changes - before
        extend_stream_range(conn, sid, ps.first_ts, ps.last_ts)
        result.inserted += inserted
        result.duplicates += len(ps.rows) - inserted
        result.written.append((sid, ps.labels, ps.rows))
    if result.inserted:
        conn.execute(ROLLUP_NEW_ROWS, (MINUTE_NS, newest_before))
    return result
