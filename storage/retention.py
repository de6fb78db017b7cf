"""Removing expired data from disk (the compactor's retention sweep, services/upkeep/compactor.py).

Per stream the sweep is given a cutoff and removes, in bounded writer jobs, everything
older: head rows, sealed blocks that end before it, and the rollup minutes before it. A
sealed block that straddles the cutoff is kept whole (its expired rows stay hidden by the
reads' own cutoff) and the cutoff moves down to the whole minute before that block's first
row, so that what is left on disk and its rollups always describe the same rows: counts
from rollups stay exact. A stream left with nothing is removed with its postings.
"""

from __future__ import annotations

import json
import sqlite3
from typing import NamedTuple, Sequence

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


# Streams whose cutoffs one statement finds, and at most how many one writer job expires:
# a sweep over 100,000 streams was three writer jobs and a read per stream, each its own
# commit, every sweep (issue 22)
SWEEP_STREAMS = 500
EXPIRE_STREAMS = 256


def disk_cutoffs(conn: sqlite3.Connection, wanted: Sequence[tuple[int, int]]) -> dict[int, int]:
    """Stream id -> the cutoff the sweep may use on disk, for (stream id, cutoff) pairs: the
    cutoff floored to a minute, lowered below every block that would straddle it. One
    statement for all of them, another only for the streams whose lowered cutoff meets yet
    another block."""
    cuts = {sid: cutoff - cutoff % MINUTE_NS for sid, cutoff in wanted}
    todo = dict(cuts)
    while todo:
        rows = conn.execute(
            "SELECT j.value ->> 0, (SELECT min(b.min_ts) FROM blocks b "
            "WHERE b.stream_id = j.value ->> 0 AND b.max_ts >= j.value ->> 1 "
            "AND b.min_ts < j.value ->> 1) FROM json_each(?) j",
            (json.dumps(list(todo.items())),)).fetchall()
        todo = {}
        for sid, low in rows:
            if low is not None:
                cuts[sid] = todo[sid] = low - low % MINUTE_NS
    return cuts


def expire(conn: sqlite3.Connection, stream_id: int, cut: int,
           batch: int = 5000) -> tuple[int, int, bool]:
    """One bounded step (writer): delete up to `batch` head rows and `batch // 50` blocks
    older than `cut` (from `disk_cutoffs`); rollups go once nothing older is left. Returns
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


class Expired(NamedTuple):
    lines: int
    blocks: int
    streams: int                   # removed, nothing left in them
    left: list[tuple[int, int]]    # (stream id, cut) still to expire


def expire_streams(conn: sqlite3.Connection, cuts: Sequence[tuple[int, int]], ids: StreamIds,
                   batch: int = 5000) -> Expired:
    """One writer job over many streams, each (stream id, cut) in turn as `expire` does and
    removed if nothing is left, until `batch` head rows (or `batch // 50` blocks) or
    EXPIRE_STREAMS streams are spent: one commit for many streams, and still a bounded wait
    for the pushes behind it."""
    lines = blocks = streams = 0
    for k, (sid, cut) in enumerate(cuts):
        if k == EXPIRE_STREAMS or lines >= batch or blocks >= batch // 50:
            return Expired(lines, blocks, streams, list(cuts[k:]))
        n, b, more = expire(conn, sid, cut, max(1, batch - lines))
        lines, blocks = lines + n, blocks + b
        if more:
            return Expired(lines, blocks, streams, list(cuts[k:]))
        streams += drop_if_empty(conn, sid, ids)
    return Expired(lines, blocks, streams, [])


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
