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
    # (minute, metadata or '') -> [lines, bytes]
    rollup: dict[tuple[int, str], list[int]] = field(default_factory=dict)
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
UPSERT_ROLLUP = ("INSERT INTO rollups (stream_id, minute, metadata, lines, bytes) "
                 "VALUES (?, ?, ?, ?, ?) ON CONFLICT (stream_id, minute, metadata) DO UPDATE "
                 "SET lines = lines + excluded.lines, bytes = bytes + excluded.bytes")


def append(conn: sqlite3.Connection, cache: dict, tenant: str,
           streams: list[PreparedStream]) -> AppendResult:
    result = AppendResult()
    for ps in streams:
        if not ps.rows:
            continue
        sid = get_or_create_stream(conn, cache, tenant, ps.labels, ps.canonical, ps.first_ts)
        before = conn.total_changes
        conn.executemany(INSERT_ENTRY, [(sid, ts, h, line, md) for ts, h, line, md in ps.rows])
        inserted = conn.total_changes - before
        if inserted == len(ps.rows):
            conn.executemany(UPSERT_ROLLUP, [(sid, minute, md, lines, size) for (minute, md),
                                             (lines, size) in ps.rollup.items()])
        else:
            # some rows were exact duplicates of stored ones: count the touched minutes again
            # from the entries themselves rather than trusting the batch's tallies
            _recount_minutes(conn, sid, {minute for minute, _ in ps.rollup})
        extend_stream_range(conn, sid, ps.first_ts, ps.last_ts)
        result.inserted += inserted
        result.duplicates += len(ps.rows) - inserted
        result.written.append((sid, ps.labels, ps.rows))
    return result


def _recount_minutes(conn: sqlite3.Connection, sid: int, minutes: set[int]) -> None:
    for minute in minutes:
        conn.execute("DELETE FROM rollups WHERE stream_id = ? AND minute = ?", (sid, minute))
        conn.execute(
            "INSERT INTO rollups (stream_id, minute, metadata, lines, bytes) "
            "SELECT stream_id, ?, coalesce(metadata, ''), count(*), "
            "sum(length(CAST(line AS BLOB))) FROM entries "
            "WHERE stream_id = ? AND ts >= ? AND ts < ? GROUP BY coalesce(metadata, '')",
            (minute, sid, minute, minute + MINUTE_NS))
