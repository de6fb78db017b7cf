"""Removing expired data from disk (the compactor's retention sweep, services/upkeep/compactor.py).

Per stream the sweep is given a cutoff and removes, in bounded writer jobs, everything
older: head rows, sealed blocks that end before it, and the rollup minutes before it. A
sealed block that straddles the cutoff is kept whole (its expired rows stay hidden by the
reads' own cutoff) and the cutoff moves down to the whole minute before that block's first
row, so that what is left on disk and its rollups always describe the same rows: counts
from rollups stay exact. A stream left with nothing is removed with its postings.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from logql.model import MINUTE_NS, parse_canonical
from storage.stream_ids import StreamIds


class StreamInfo(NamedTuple):
    tenant: str
    labels: dict[str, str]
    first_ts: int   # ns: nothing older is on disk
    last_ts: int
    # on ClickHouse, the retention rules its lines were stored under (0: none; see
    # RetentionPolicy.rule_of); lines stored before the rules were recorded count as 0
    rules: frozenset[int] = frozenset((0,))


def stream_labels(conn: sqlite3.Connection) -> dict[int, StreamInfo]:
    """Stream id -> what the sweep needs of it, every stream: one pass over `streams`, the
    labels decoded from each stream's own row."""
    return {sid: StreamInfo(tenant, parse_canonical(text), first, last)
            for sid, tenant, text, first, last in conn.execute(
                "SELECT id, tenant, labels, first_ts, last_ts FROM streams")}


def disk_cutoff(conn: sqlite3.Connection, stream_id: int, cutoff: int) -> int:
    """The cutoff the sweep may use on disk: `cutoff` floored to a minute, lowered below
    every block that would straddle it."""
    cut = cutoff - cutoff % MINUTE_NS
    while True:
        row = conn.execute("SELECT min(min_ts) FROM blocks WHERE stream_id = ? AND min_ts < ? "
                           "AND max_ts >= ?", (stream_id, cut, cut)).fetchone()
        if row[0] is None:
            return cut
        cut = row[0] - row[0] % MINUTE_NS


def expire(conn: sqlite3.Connection, stream_id: int, cut: int,
           batch: int = 5000) -> tuple[int, int, bool]:
    """One bounded step (writer): delete up to `batch` head rows and `batch // 50` blocks
    older than `cut` (from `disk_cutoff`); rollups go once nothing older is left. Returns
    (lines removed, blocks removed, whether more is left)."""
    cur = conn.execute(
        "DELETE FROM entries WHERE id IN (SELECT id FROM entries WHERE stream_id = ? AND ts < ? "
        "LIMIT ?)", (stream_id, cut, batch))
    rows = cur.rowcount
    block_rows = conn.execute(
        "SELECT id, rows FROM blocks WHERE stream_id = ? AND max_ts < ? LIMIT ?",
        (stream_id, cut, max(1, batch // 50))).fetchall()
    if block_rows:
        conn.executemany("DELETE FROM blocks WHERE id = ?", [(b,) for b, _ in block_rows])
    lines = rows + sum(n for _, n in block_rows)
    if rows == batch or len(block_rows) == max(1, batch // 50):
        return lines, len(block_rows), True
    conn.execute("DELETE FROM rollups WHERE stream_id = ? AND minute < ?", (stream_id, cut))
    # the label APIs bound a stream by these: nothing older than the cut is left
    conn.execute("UPDATE streams SET first_ts = max(first_ts, ?) WHERE id = ?", (cut, stream_id))
    return lines, len(block_rows), False


def drop_if_empty(conn: sqlite3.Connection, stream_id: int, ids: StreamIds) -> bool:
    """Remove a stream that holds no line any more, with its postings and rollups (writer).
    `ids` is the writer's map of stream ids: its entry must go too, or the next push would
    write to the removed id."""
    if conn.execute("SELECT 1 FROM entries WHERE stream_id = ? LIMIT 1", (stream_id,)).fetchone() \
            or conn.execute("SELECT 1 FROM blocks WHERE stream_id = ? LIMIT 1",
                            (stream_id,)).fetchone():
        return False
    row = conn.execute("SELECT tenant, labels FROM streams WHERE id = ?", (stream_id,)).fetchone()
    if row is None:
        return False
    tenant, canonical = row
    conn.execute("DELETE FROM rollups WHERE stream_id = ?", (stream_id,))
    # by the postings' own key: they are keyed by label, and a delete by stream id alone
    # would read every posting of every stream
    conn.executemany("DELETE FROM stream_labels WHERE tenant = ? AND name = ? AND value = ? "
                     "AND stream_id = ?",
                     [(tenant, name, value, stream_id)
                      for name, value in parse_canonical(canonical).items()])
    conn.execute("DELETE FROM streams WHERE id = ?", (stream_id,))
    ids.remove(tenant, canonical)
    return True
