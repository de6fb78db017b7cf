"""The block catalog: new blocks' ids, and block summaries (bounds, counts, flags, metadata
names, a small Bloom filter), each read from SQLite once per process and kept by block id.

Thousands of streams make thousands of blocks in an hour, and every broad read starts from
their summaries: 20,000 quiet pods were 20,000 rows of ten columns turned into Python
objects per query (47 ms of SQLite, ~40 ms of Python, issue 22). A block never changes once
written: sealing, merges, delete requests and retention insert new blocks and delete old
ones, and a new block never takes an old one's id (migration 0009, `insert_block`). So a
summary read once is right for as long as its block exists, and a query reads only the ids
of the blocks in its range (one index walk) and the summaries it has not seen.

The kept summaries are per database file (path, device, inode and the file's random
`lineage`), at most MAX_CACHED of them in a process; past that the oldest are dropped (never
those of the read that makes room) and read again as queries need them; a read that needs
more than fit beside its own reads them as before and keeps none. A read of 100,000 quiet
pods' blocks keeps them all: a dashboard asks the same again, and keeping none (as when a
read could keep at most half of MAX_CACHED) made each such needle load 100,000 summaries
again, 256 of its 830 ms (issue 22).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from typing import Sequence

from storage.inserts import execute_values, values_statements
from storage.stream_set import stream_condition


@dataclass(slots=True)
class Summary:
    id: int
    stream_id: int
    min_ts: int
    max_ts: int
    rows: int
    bytes: int
    flags: int
    aligned: int
    md_names: frozenset[str]


# Bloom filters up to this size are kept with the summaries (what any caller may ask for)
KEPT_BLOOM_MAX = 4096
# summaries kept per process, over every database: about 490 bytes each with a small Bloom
# filter (20,000 quiet pods' blocks: 9.8 MB), so at most about 50 MB a process
MAX_CACHED = 100_000

_IDS_SQL = "SELECT id FROM blocks WHERE {streams} AND max_ts >= ? AND min_ts < ?{aligned}"
_BY_ID_SQL = ("SELECT id, stream_id, min_ts, max_ts, rows, bytes, flags, aligned, md_names, "
              "CASE WHEN length(bloom) <= ? THEN bloom END "
              "FROM blocks WHERE id IN (SELECT value FROM json_each(?))")
_LOAD_CHUNK = 20_000

Kept = tuple  # (Summary, bloom bytes or None when larger than KEPT_BLOOM_MAX)
_kept: dict[tuple, dict[int, Kept]] = {}
_lock = threading.Lock()


def summaries(conn: sqlite3.Connection, stream_ids: Sequence[int], start: int, end: int,
              bloom_max: int = 0, aligned: bool = False) -> list[tuple]:
    """Summaries of the blocks with rows possibly in [start, end): (Summary, bloom | None),
    with the Bloom filters of at most `bloom_max` bytes (at most KEPT_BLOOM_MAX); with
    `aligned`, only of blocks with a row on a whole minute. In the index's order (stream,
    then newest row)."""
    if not stream_ids or start >= end:
        return []
    streams, stream_params = stream_condition(stream_ids)
    sql = _IDS_SQL.format(streams=streams, aligned=" AND aligned > 0" if aligned else "")
    ids = [i for (i,) in conn.execute(sql, (*stream_params, start, end))]
    if not ids:
        return []
    kept = _kept_for(conn)
    found = [kept.get(i) for i in ids]
    missing = [i for i, k in zip(ids, found) if k is None]
    if missing:
        loaded = _load(conn, kept, missing, ids)
        # outside a read transaction a block may go between the two statements: it is left
        # out, as the one statement would have left it (reads run in a snapshot, where not)
        found = [k if k is not None else loaded.get(i) for i, k in zip(ids, found)]
        found = [k for k in found if k is not None]
    if bloom_max >= KEPT_BLOOM_MAX:
        return found   # the kept pairs as they are: the usual case, no work per block
    if bloom_max <= 0:
        return [(s, None) for s, _ in found]
    return [(s, b if b is not None and len(b) <= bloom_max else None) for s, b in found]


def _load(conn: sqlite3.Connection, kept: dict[int, Kept], ids: list[int],
          read: list[int]) -> dict[int, Kept]:
    """The summaries of `ids`, kept as well when they fit beside the other summaries of
    `read` (every block of the read)."""
    out: dict[int, Kept] = {}
    # blocks mostly share a few metadata name sets: one frozenset each
    md_names: dict[str, frozenset[str]] = {"": frozenset()}
    for i in range(0, len(ids), _LOAD_CHUNK):
        for r in conn.execute(_BY_ID_SQL, (KEPT_BLOOM_MAX, json.dumps(ids[i:i + _LOAD_CHUNK]))):
            text = r[8] or ""
            names = md_names.get(text)
            if names is None:
                names = md_names[text] = frozenset(text.split("\n"))
            out[r[0]] = (Summary(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], names),
                         r[9])
    if len(out) > MAX_CACHED:
        return out  # more than may be kept at all
    with _lock:
        if _make_room(kept, len(out), read):
            kept.update(out)
    return out


def _make_room(kept: dict[int, Kept], wanted: int, read: list[int]) -> bool:
    """Drops kept summaries until `wanted` more fit under MAX_CACHED (every file's
    together): other files' first, then this file's in the order they were kept, never one
    of the blocks the read itself needs (a broad read would otherwise push out what it is
    about to use: the next dashboard refresh reads those again). False when they cannot
    fit. Dropping the oldest, not everything: a small read after a broad one costs the
    broad one only as many summaries as the small one needed."""
    excess = sum(map(len, _kept.values())) + wanted - MAX_CACHED
    if excess <= 0:
        return True
    protected: set[int] | None = None
    for table in [t for t in _kept.values() if t is not kept] + [kept]:
        if table is kept:
            protected = set(read)
        gone = []
        for key in table:
            if excess <= 0:
                break
            if protected is None or key not in protected:
                gone.append(key)
                excess -= 1
        for key in gone:
            del table[key]
        if excess <= 0:
            return True
    return False


def _kept_for(conn: sqlite3.Connection) -> dict[int, Kept]:
    """The summaries kept for the database file `conn` reads."""
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    if not path:
        return {}  # an in-memory database: nothing outlives the connection to key it by
    try:
        lineage = conn.execute("SELECT lineage FROM seal_state WHERE id = 1").fetchone()[0]
    except sqlite3.OperationalError:
        # a database not yet migrated to 0009, read as it is (a tool's read-only look):
        # its ids may repeat, so nothing is kept
        return {}
    st = os.stat(path)
    key = (path, st.st_dev, st.st_ino, lineage)
    with _lock:
        kept = _kept.get(key)
        if kept is None:
            # a test process opens thousands of databases: only the latest few keep theirs
            while len(_kept) >= 8:
                del _kept[next(iter(_kept))]
            kept = _kept[key] = {}
        return kept


def insert_blocks(conn: sqlite3.Connection, blocks: Sequence[tuple[int, object]], *,
                  max_id: int = 0) -> int:
    """Insert encoded blocks (codec.EncodedBlock), each (stream id, block), under ids no
    block ever had, consecutive in the given order (writer, inside its transaction): the ids
    taken in one statement, which also raises seal_state.max_id to `max_id` (a push's highest
    entry id), and the rows inserted in as few as storage/inserts.py makes them (a push
    brings a pack per stream). Returns the last id (0 for none)."""
    if not blocks:
        if max_id:
            conn.execute(RAISE_MAX_ID, (max_id,))
        return 0
    last = conn.execute(f"{TAKE_BLOCK_IDS} RETURNING last_block_id",
                        (len(blocks), max_id)).fetchone()[0]
    execute_values(conn, INSERT_BLOCKS, 16, _block_rows(blocks, last - len(blocks) + 1))
    return last


# seal_state.max_id raised to a push's highest entry id; with block ids taken for n blocks
RAISE_MAX_ID = "UPDATE seal_state SET max_id = max(max_id, ?) WHERE id = 1"
TAKE_BLOCK_IDS = ("UPDATE seal_state SET last_block_id = last_block_id + ?, "
                  "max_id = max(max_id, ?) WHERE id = 1")
INSERT_BLOCKS = ("INSERT INTO blocks (id, stream_id, min_ts, max_ts, rows, bytes, min_id, "
                 "max_id, flags, aligned, md_names, bloom, keys, lengths, metadata, lines) "
                 "VALUES {values}")


def _block_rows(blocks: Sequence[tuple[int, object]], first_id: int) -> list[tuple]:
    return [(block_id, sid, b.min_ts, b.max_ts, b.rows, b.bytes, b.min_id, b.max_id, b.flags,
             b.aligned, b.md_names, b.bloom, b.keys, b.lengths, b.metadata, b.lines)
            for block_id, (sid, b) in enumerate(blocks, first_id)]


def block_statements(blocks: Sequence[tuple[int, object]], last_block_id: int, *,
                     max_id: int = 0) -> list[tuple[str, Sequence]]:
    """insert_blocks as statements to run later in the same transaction
    (storage/sqlbatch.py), `last_block_id` being seal_state's as read in it."""
    if not blocks:
        return [(RAISE_MAX_ID, (max_id,))] if max_id else []
    return [(TAKE_BLOCK_IDS, (len(blocks), max_id)),
            *values_statements(INSERT_BLOCKS, 16, _block_rows(blocks, last_block_id + 1))]


def insert_block(conn: sqlite3.Connection, stream_id: int, b) -> int:
    """insert_blocks for one block; returns its id."""
    return insert_blocks(conn, [(stream_id, b)])
