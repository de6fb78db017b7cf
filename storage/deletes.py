"""Delete requests in SQLite, and removing the lines they name from the head and the blocks.

Requests: `add`, `pieces`, `cancel`, `mark_processed`, cache generation numbers.

Physical deletion (the compactor, services/upkeep/deletes.py) works one piece at a time, on
many streams at once: `head_matches` lists the head rows a predicate picks,
`delete_head_rows` removes many streams' and takes them out of the rollups;
`blocks_overlapping` lists the blocks in range,
`rewrite_block` replaces one block by the same block without the picked rows (or removes
it). Each writer step is one transaction and checks that what it read is still there, so a
crash leaves either the old or the new state, and running the work again removes nothing
twice.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from typing import Callable, Sequence

from logql.model import MINUTE_NS
from storage.blocks import codec as B
from storage.blocks.catalog import insert_block


# -- requests --------------------------------------------------------------------------------

def add(conn: sqlite3.Connection, tenant: str, request_id: str, query: str,
        pieces: Sequence[tuple[int, int]], created_at: float) -> None:
    conn.executemany(
        "INSERT INTO delete_requests (tenant, request_id, seq, query, start_ns, end_ns, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(tenant, request_id, i, query, a, b, created_at) for i, (a, b) in enumerate(pieces)])
    bump_generation(conn, tenant)


def exists(conn: sqlite3.Connection, tenant: str, request_id: str) -> bool:
    return conn.execute("SELECT 1 FROM delete_requests WHERE tenant = ? AND request_id = ?",
                        (tenant, request_id)).fetchone() is not None


def pieces(conn: sqlite3.Connection, tenant: str | None = None) -> list[tuple]:
    """(tenant, request_id, seq, query, start_ns, end_ns, created_at, processed), of one
    tenant or all, oldest first."""
    sql = ("SELECT tenant, request_id, seq, query, start_ns, end_ns, created_at, processed "
           "FROM delete_requests")
    if tenant is None:
        return conn.execute(sql + " ORDER BY created_at, request_id, seq").fetchall()
    return conn.execute(sql + " WHERE tenant = ? ORDER BY created_at, request_id, seq",
                        (tenant,)).fetchall()


def cancel(conn: sqlite3.Connection, tenant: str, request_id: str) -> None:
    conn.execute("DELETE FROM delete_requests WHERE tenant = ? AND request_id = ?",
                 (tenant, request_id))
    bump_generation(conn, tenant)


def mark_processed(conn: sqlite3.Connection, tenant: str, request_id: str, seq: int) -> None:
    conn.execute("UPDATE delete_requests SET processed = 1 WHERE tenant = ? AND request_id = ? "
                 "AND seq = ?", (tenant, request_id, seq))
    bump_generation(conn, tenant)


def generation(conn: sqlite3.Connection, tenant: str) -> int:
    row = conn.execute("SELECT generation FROM cache_generation WHERE tenant = ?",
                       (tenant,)).fetchone()
    return row[0] if row else 0


def bump_generation(conn: sqlite3.Connection, tenant: str) -> None:
    conn.execute("INSERT INTO cache_generation (tenant, generation) VALUES (?, 1) "
                 "ON CONFLICT (tenant) DO UPDATE "
                 "SET generation = cache_generation.generation + 1", (tenant,))


# -- physical deletion -----------------------------------------------------------------------

Pick = Callable[[str], bool]
# a line as a head row or a block's row: (id, ts, line, metadata)
Row = tuple[int, int, str, str | None]


def head_matches(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int, end: int,
                 pick: Pick) -> dict[int, list[Row]]:
    """Stream id -> (id, ts, line, metadata) of its head rows with start <= ts <= end that
    `pick` names, for many streams in one statement (streams with none are left out)."""
    out: dict[int, list[Row]] = {}
    for sid, *row in conn.execute(
            "SELECT e.stream_id, e.id, e.ts, e.line, e.metadata FROM json_each(?) j "
            "CROSS JOIN entries e WHERE e.stream_id = j.value AND e.ts >= ? AND e.ts <= ?",
            (json.dumps(list(stream_ids)), start, end)):
        if pick(row[2]):
            out.setdefault(sid, []).append(tuple(row))
    return out


def delete_head_rows(conn: sqlite3.Connection, picked: Sequence[tuple[int, Sequence[Row]]]
                     ) -> tuple[dict[int, list[Row]], int, set[int]]:
    """Remove these head rows (stream id, rows) of many streams (writer) and their share of
    the rollups. Rows already gone are skipped: the sealer may have moved them into a block
    since they were read, so their streams are returned for their blocks to be looked at
    again. Returns the rows removed by stream, their bytes, and those streams."""
    ids = json.dumps([r[0] for _, rows in picked for r in rows])
    present = {i for (i,) in conn.execute(
        "SELECT id FROM entries WHERE id IN (SELECT value FROM json_each(?))", (ids,))}
    conn.execute("DELETE FROM entries WHERE id IN (SELECT value FROM json_each(?))", (ids,))
    gone_of: dict[int, list[Row]] = {}
    size = 0
    moved: set[int] = set()
    for sid, rows in picked:
        gone = [r for r in rows if r[0] in present]
        if len(gone) < len(rows):
            moved.add(sid)
        if gone:
            gone_of.setdefault(sid, []).extend(gone)
            size += _uncount(conn, sid, [(r[1], r[2], r[3]) for r in gone])
    return gone_of, size, moved


def blocks_overlapping(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int,
                       end: int) -> list[tuple[int, int, int]]:
    """(stream id, block id, rows) of the blocks of these streams that overlap [start, end],
    in one statement."""
    return conn.execute(
        "SELECT b.stream_id, b.id, b.rows FROM json_each(?) j CROSS JOIN blocks b "
        "WHERE b.stream_id = j.value AND b.max_ts >= ? AND b.min_ts <= ?",
        (json.dumps(list(stream_ids)), start, end)).fetchall()


def block_rows(conn: sqlite3.Connection, block_id: int) -> list[Row]:
    """(id, ts, line, metadata) of every row of a block."""
    return block_contents(conn, block_id)[0]


def block_contents(conn: sqlite3.Connection,
                   block_id: int) -> tuple[list[Row], bool]:
    """A block's rows (as block_rows) and whether it is a pack (the head): rewritten, a pack
    must stay one, so the sealer still merges it and the pattern miner still finds its
    lines."""
    r = conn.execute("SELECT rows, flags, keys, lengths, metadata, lines FROM blocks "
                     "WHERE id = ?", (block_id,)).fetchone()
    return ([], False) if r is None else (B.decode_rows(*r), bool(r[1] & B.FLAG_PACK))


def rewrite_block(conn: sqlite3.Connection, stream_id: int, block_id: int,
                  keep: Sequence[Row],
                  removed: Sequence[Row],
                  encoded: B.EncodedBlock | None) -> int | None:
    """Replace a block by `encoded` (its kept rows; None: nothing kept) and take the removed
    rows out of the rollups (writer). Returns the bytes removed; None, changing nothing, if
    the block is gone."""
    if conn.execute("DELETE FROM blocks WHERE id = ?", (block_id,)).rowcount != 1:
        return None
    if encoded is not None:
        insert_block(conn, stream_id, encoded)
    return _uncount(conn, stream_id, [(r[1], r[2], r[3]) for r in removed])


def _uncount(conn: sqlite3.Connection, stream_id: int,
             rows: Sequence[tuple[int, str, str | None]]) -> int:
    """Take rows (ts, line, metadata) out of the per-minute rollups, exactly; returns their
    bytes."""
    tallies: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    for ts, line, md in rows:
        t = tallies[(ts - ts % MINUTE_NS, md or "")]
        t[0] += 1
        t[1] += len(line.encode("utf-8", "surrogatepass"))
    for (minute, md), (n, size) in tallies.items():
        conn.execute("UPDATE rollups SET lines = lines - ?, bytes = bytes - ? "
                     "WHERE stream_id = ? AND minute = ? AND metadata = ?",
                     (n, size, stream_id, minute, md))
    conn.execute("DELETE FROM rollups WHERE stream_id = ? AND lines <= 0", (stream_id,))
    return sum(t[1] for t in tallies.values())
