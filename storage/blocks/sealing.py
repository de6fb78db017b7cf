"""Moving head rows into sealed blocks, and what the push path needs to know about blocks.

The head is packs (a stream's lines of a large push, a `blocks` row flagged FLAG_PACK, see
storage/entries.py) and rows of the `entries` table (the lines of small pushes, and what
databases from before packs hold). The sealer (services/upkeep/sealer.py) calls, on a
reader connection:

    scan_head(conn, now, window, grace, max_rows)     which (stream, window) groups to seal
    read_group(conn, stream, lo, hi, limit)           a block of their rows, encoded

outside any transaction, and then, through the writer:

    store_prepared(conn, stream, prepared)

which inserts the block and deletes exactly those packs and rows from the head in one
transaction. If one is gone by then (a delete request, retention) the block is not stored
and the sealer reads the group again: a line is never in both places and never in neither.

A quiet stream (a pod logging a few lines an hour) would get a block of a few rows per
window, and a read pays a fixed cost per block (a summary, a decompression per column):
with thousands of such streams that cost was most of a read. So when the rows to seal are
few and the stream's newest block is small, `prepare_block` encodes both into one block,
and `store_prepared` replaces the old block in the same transaction (if that block changed
meanwhile, nothing is stored and the sealer reads again). Blocks still hold one stream each.
"""

from __future__ import annotations

import json
import sqlite3
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Callable, Sequence

from storage.blocks import codec as B
from storage.blocks.catalog import insert_block
from storage.blocks.packs import StoredPack, seal_packs
from storage.deletes import block_rows

# fewer free pages than this stay in the file (new rows reuse them)
MIN_FREE_PAGES = 256
# a group of the head this large is sealed even if its window is still open
DEFAULT_MAX_ROWS = 20_000
# rows to seal fewer than this go into the stream's newest block if it holds fewer too (and
# the two span at most MERGE_MAX_WINDOWS windows): below it a block's fixed cost to a read
# outweighs its rows', and re-encoding it costs little
MERGE_BELOW_ROWS = 64
# small blocks (quiet streams) stored by one transaction, one commit: up to this many blocks
# or rows (a commit per block of a few rows cost more than the block)
BATCH_BLOCKS = 128
BATCH_ROWS = 5_000
MERGE_MAX_WINDOWS = 24
# a stream's window with this many packs is sealed even while it is open: a read pays a
# pack's fixed cost (a summary, a decompression per column) as it pays a block's
PACKS_DUE = 256


class HeadChanged(RuntimeError):
    """The rows a block was built from are no longer all in the head."""


@dataclass(frozen=True)
class Group:
    stream_id: int
    lo: int          # window start, ns
    hi: int          # window end, ns
    rows: int
    packs: int = 0   # of the rows, the packs holding some (the rest are `entries` rows)


@dataclass(frozen=True)
class HeadScan:
    """What one look at the head found: the groups due now, and when the next one can
    be due at the earliest, so that the sealer need not look again before then."""
    groups: list[Group]
    next_due_ns: int | None   # the earliest window end + grace among the groups not due
    largest_open: int         # rows of the largest group not due (it is due at max_rows)
    most_packs_open: int = 0  # packs of the group not due with the most (due at PACKS_DUE)


_WINDOW = "ts - ((ts % ?1) + ?1) % ?1"


def scan_head(conn: sqlite3.Connection, now_ns: int, window_ns: int, grace_ns: int,
              max_rows: int = DEFAULT_MAX_ROWS, everything: bool = False,
              streams: Sequence[int] | None = None) -> HeadScan:
    """Head groups per stream and window that are due: the window ended at least `grace_ns`
    ago (late lines for it are unlikely), or the group holds `max_rows` rows or PACKS_DUE
    packs already, or `everything` (a flush). Oldest windows first. A pack belongs to the
    window of its oldest line.

    The packs' partial index alone, and one pass over the `entries` (stream, ts) index in
    its own order, no sort: most streams hold one window, and only those spanning several
    are counted per window. With `streams`, only theirs."""
    cutoff = now_ns - grace_ns
    only, param = "", ()
    if streams is not None:
        only, param = " AND stream_id IN (SELECT value FROM json_each(?2))", \
            (json.dumps(list(streams)),)
    # (window start, stream) -> [rows, packs] of the packs; the entries' groups are a list of
    # tuples, as before packs: a dict entry per stream for 100,000 quiet streams cost a look
    # tens of milliseconds and megabytes more
    packed: dict[tuple[int, int], list[int]] = {
        (win, sid): [n, packs] for sid, win, n, packs in conn.execute(
            "SELECT stream_id, min_ts - ((min_ts % ?1) + ?1) % ?1, sum(rows), count(*) "
            f"FROM blocks WHERE flags & 4{only} GROUP BY 1, 2", (window_ns, *param))}
    found: list[tuple[int, int, int, int]] = []  # (window start, stream, rows, packs)
    if streams is None:
        per_stream = conn.execute(
            "SELECT stream_id, min(ts), max(ts), count(*) FROM entries GROUP BY stream_id")
    else:
        per_stream = conn.execute(
            "SELECT stream_id, min(ts), max(ts), count(*) FROM entries WHERE stream_id IN "
            "(SELECT value FROM json_each(?)) GROUP BY stream_id", param)
    for sid, first, last, n in per_stream.fetchall():
        lo = first - first % window_ns
        if last < lo + window_ns:
            found.append((lo, sid, n, 0))
            continue
        found.extend((win, sid, rows, 0) for win, rows in conn.execute(
            f"SELECT {_WINDOW} AS win, count(*) FROM entries WHERE stream_id = ?2 GROUP BY 1",
            (window_ns, sid)))
    if packed:
        merged = []
        for lo, sid, n, _ in found:
            p = packed.pop((lo, sid), None)
            merged.append((lo, sid, n + p[0], p[1]) if p else (lo, sid, n, 0))
        found = merged + [(lo, sid, n, packs) for (lo, sid), (n, packs) in packed.items()]
    found.sort()
    groups, next_due, largest, most_packs = [], None, 0, 0
    for lo, sid, n, packs in found:
        if everything or lo + window_ns <= cutoff or n >= max_rows or packs >= PACKS_DUE:
            groups.append(Group(sid, lo, lo + window_ns, n, packs))
        else:
            due = lo + window_ns + grace_ns
            next_due = due if next_due is None else min(next_due, due)
            largest = max(largest, n)
            most_packs = max(most_packs, packs)
    return HeadScan(groups, next_due, largest, most_packs)


def sealable_groups(conn: sqlite3.Connection, now_ns: int, window_ns: int, grace_ns: int,
                    max_rows: int = DEFAULT_MAX_ROWS, everything: bool = False) -> list[Group]:
    """The groups of `scan_head` alone."""
    return scan_head(conn, now_ns, window_ns, grace_ns, max_rows, everything).groups


def head_rows(conn: sqlite3.Connection, stream_id: int, lo: int, hi: int,
              limit: int, max_id: int | None = None) -> list[tuple[int, int, str, str | None]]:
    """(id, ts, line, metadata) of one stream's head rows with lo <= ts < hi (and id <=
    max_id, if given), oldest first."""
    return conn.execute(
        "SELECT id, ts, line, metadata FROM entries WHERE stream_id = ? AND ts >= ? AND ts < ? "
        "AND id <= ? ORDER BY ts, id LIMIT ?",
        (stream_id, lo, hi, (1 << 63) - 1 if max_id is None else max_id, limit)).fetchall()


def store_block(conn: sqlite3.Connection, stream_id: int, block: B.EncodedBlock,
                entry_ids: Sequence[int]) -> int:
    """Insert the block and delete its rows from the head (writer, inside a transaction);
    return the block id. Raises HeadChanged, leaving nothing changed, if a row is missing."""
    cur = conn.execute(
        "DELETE FROM entries WHERE id IN (SELECT value FROM json_each(?)) AND stream_id = ?",
        (json.dumps(list(entry_ids)), stream_id))
    if cur.rowcount != len(entry_ids):
        raise HeadChanged(f"{len(entry_ids) - cur.rowcount} of the block's rows left the head")
    b = block
    block_id = insert_block(conn, stream_id, b)
    # `seals`: a second reader's snapshot that missed this seal is not used (second_reader)
    conn.execute("UPDATE seal_state SET max_id = max(max_id, ?), seals = seals + 1 "
                 "WHERE id = 1", (b.max_id,))
    return block_id


@dataclass
class Prepared:
    """A block encoded from head rows, ready for `store_prepared`."""
    entry_ids: list[int]         # the `entries` rows it takes
    block: B.EncodedBlock
    replaces: tuple[int, bytes] | None = None  # the block merged in: its id and keys
    packs: list[tuple[int, bytes]] = field(default_factory=list)  # packs it takes: id, keys
    rows: int = 0                # head rows it takes (entries' and packs')
    # the packs' rows the block leaves (past the window's end or its `limit`), as one pack
    repack: B.EncodedBlock | None = None


def stored_packs(conn: sqlite3.Connection, stream_id: int, lo: int, hi: int, limit: int,
                 max_id: int | None = None) -> list[StoredPack]:
    """One stream's packs whose oldest line is in [lo, hi), as stored, oldest first, until
    they hold `limit` rows (at least one pack); none holding an id above `max_id`."""
    packs: list[StoredPack] = []
    held = 0
    for p in map(StoredPack._make, conn.execute(
            "SELECT id, rows, flags, min_ts, max_ts, max_id, keys, lengths, metadata, lines "
            "FROM blocks WHERE flags & 4 AND stream_id = ? AND min_ts >= ? AND min_ts < ? "
            "ORDER BY min_ts", (stream_id, lo, hi))):
        if max_id is not None and p.max_id > max_id:
            continue
        if packs and held + p.rows > limit:
            break
        packs.append(p)
        held += p.rows
    return packs


def read_group(conn: sqlite3.Connection, stream_id: int, lo: int, hi: int, limit: int,
               max_id: int | None = None, packs: bool = True) -> Prepared | None:
    """A block of up to `limit` head rows of one stream's window (its packs first, then
    `entries` rows), encoded (reader, outside any transaction); None if none are left.
    A pack's rows past the window's end (a push spanning windows) or past `limit` go back
    into the head as a new pack, with their ids. `packs` False: the group has none (a pack
    pushed since is sealed by a later round)."""
    # without packs when the look found none: a query per group, and 100,000 quiet streams
    # make 100,000 groups of a few rows each
    stored = stored_packs(conn, stream_id, lo, hi, limit, max_id) if packs else []
    whole = _packs_alone(conn, stream_id, lo, hi, limit, max_id, stored)
    if whole is not None:
        return whole
    rows: list[tuple[int, int, str, str | None]] = []
    for p in stored:
        rows.extend(B.decode_rows(p.rows, p.flags, p.keys, p.lengths, p.metadata, p.lines))
    packs = [(p.id, p.keys) for p in stored]
    rows.sort(key=lambda r: (r[1], r[0]))
    take = bisect_left(rows, hi, key=lambda r: r[1])
    rest = rows[min(take, limit):]
    rows = rows[:min(take, limit)]
    entries = head_rows(conn, stream_id, lo, hi, limit - len(rows), max_id) \
        if len(rows) < limit else []
    if not rows and not entries:
        # (a pack's oldest line is in the window, so `rest` is empty too: nothing is left)
        return None
    prepared = prepare_block(conn, stream_id, rows + entries, limit, hi - lo)
    prepared.entry_ids = [r[0] for r in entries]
    prepared.packs = packs
    prepared.rows = len(rows) + len(entries)
    if rest:
        prepared.repack = B.encode(rest, pack=True)
    return prepared


def _packs_alone(conn: sqlite3.Connection, stream_id: int, lo: int, hi: int, limit: int,
                 max_id: int | None, stored: list[StoredPack]) -> Prepared | None:
    """read_group's block when it is the packs' rows alone, one pack after another in time,
    made from their columns (packs.seal_packs); None when it is not: a pack reaching past
    the window or past `limit`, `entries` rows to take too, few rows (prepare_block may
    merge them into the stream's last block), or packs that overlap in time."""
    held = sum(p.rows for p in stored)
    if not stored or held > limit or held < MERGE_BELOW_ROWS \
            or any(p.max_ts >= hi for p in stored):
        return None
    if held < limit and head_rows(conn, stream_id, lo, hi, 1, max_id):
        return None
    block = seal_packs(stored)
    if block is None:
        return None
    return Prepared([], block, packs=[(p.id, p.keys) for p in stored], rows=held)


def prepare_block(conn: sqlite3.Connection, stream_id: int,
                  rows: Sequence[tuple[int, int, str, str | None]], max_rows: int,
                  window_ns: int) -> Prepared:
    """Encode one stream's head rows (from `head_rows`; reader), merged with the stream's
    newest block when both are small (see the module's docstring)."""
    ids = [r[0] for r in rows]
    if len(rows) < MERGE_BELOW_ROWS:
        last = conn.execute("SELECT id, rows, min_ts, max_ts, keys FROM blocks "
                            "WHERE stream_id = ? AND NOT flags & 4 ORDER BY max_ts DESC LIMIT 1",
                            (stream_id,)).fetchone()
        if last is not None and last[1] < MERGE_BELOW_ROWS \
                and last[1] + len(rows) <= max_rows:
            stamps = [r[1] for r in rows]
            span = max(last[3], max(stamps)) - min(last[2], min(stamps))
            if span < MERGE_MAX_WINDOWS * window_ns:
                held = block_rows(conn, last[0])
                return Prepared(ids, B.encode(held + list(rows)), (last[0], last[4]))
    return Prepared(ids, B.encode(rows))


def store_prepared(conn: sqlite3.Connection, stream_id: int, p: Prepared) -> int:
    """`store_block`, and the packs and the block merged in removed (writer, inside a
    transaction). Raises HeadChanged, leaving nothing changed, if a head row, a pack or that
    block changed."""
    for pack in p.packs:
        # a delete request or retention may have replaced the pack meanwhile
        if conn.execute("DELETE FROM blocks WHERE id = ? AND keys = ?", pack).rowcount != 1:
            raise HeadChanged("a pack changed")
    if p.repack is not None:
        insert_block(conn, stream_id, p.repack)
    block_id = store_block(conn, stream_id, p.block, p.entry_ids)
    if p.replaces is not None:
        # the merged block has a new id (insert_block never repeats one), so a delete
        # request rewriting the old id finds it gone; the keys (every row's ts and id)
        # tell whether it is still the block that was read
        if conn.execute("DELETE FROM blocks WHERE id = ? AND keys = ?",
                        p.replaces).rowcount != 1:
            raise HeadChanged("the block to merge into changed")
    return block_id


def store_many(conn: sqlite3.Connection, items: Sequence[tuple[int, Prepared]]) -> list[bool]:
    """`store_prepared` for several blocks in the writer's one transaction, each in its own
    savepoint: True for a block stored, False for one whose rows or merged block changed
    (that one alone left nothing changed). Thousands of quiet streams seal a few rows each,
    and a commit per block cost more than the blocks."""
    stored = []
    for stream_id, p in items:
        conn.execute("SAVEPOINT block")
        try:
            store_prepared(conn, stream_id, p)
        except HeadChanged:
            conn.execute("ROLLBACK TO block")
            stored.append(False)
        else:
            stored.append(True)
        conn.execute("RELEASE block")
    return stored


def reclaim_space(conn: sqlite3.Connection, min_free_pages: int = MIN_FREE_PAGES,
                  max_pages: int = 4096) -> int:
    """Give up to `max_pages` of the pages sealing freed back to the file system once there
    are at least `min_free_pages` (writer; needs auto_vacuum=INCREMENTAL, which new databases
    get). Returns the pages still free afterwards."""
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    if free < min_free_pages or conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        return free
    # Python's sqlite3 steps a statement without result columns once, and each step of
    # incremental_vacuum frees one page; executescript would step it through but commits
    # the writer's open transaction first
    for _ in range(min(free, max_pages)):
        conn.execute("PRAGMA incremental_vacuum(1)")
    return conn.execute("PRAGMA freelist_count").fetchone()[0]


def seal_now(conn: sqlite3.Connection, groups: Sequence[Group], max_rows: int,
             on_block=None) -> int:
    """Seal the groups on this connection outside the service (`logstore migrate` and
    tests), up to BATCH_BLOCKS blocks or BATCH_ROWS rows to a transaction, each block's
    move whole in one. `on_block(rows_so_far)` after each. Returns rows sealed."""
    sealed = blocks = rows_in_tx = 0
    try:
        for g in groups:
            while True:
                prepared = read_group(conn, g.stream_id, g.lo, g.hi, max_rows,
                                      packs=g.packs > 0)
                if prepared is None:
                    break
                if not blocks:
                    conn.execute("BEGIN IMMEDIATE")
                store_prepared(conn, g.stream_id, prepared)
                blocks += 1
                rows_in_tx += prepared.rows
                if blocks >= BATCH_BLOCKS or rows_in_tx >= BATCH_ROWS:
                    conn.execute("COMMIT")
                    blocks = rows_in_tx = 0
                sealed += prepared.rows
                if on_block is not None:
                    on_block(sealed)
        if blocks:
            conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return sealed


def make_reclaimable(conn: sqlite3.Connection) -> bool:
    """Switch a database made before sealing to incremental auto-vacuum (one VACUUM, which
    also returns every free page now); False if it already was."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
        return False
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("VACUUM")
    return True


# -- what the push path and the status pages need ---------------------------------------------

# Stream id -> the newest timestamp its packs and blocks hold, for the streams that have any,
# of a JSON array of stream ids: one index probe per stream (a GROUP BY over `IN (...)` read
# every block of the streams, and with packs a stream has one per push), answered in one row
# (the writer's steps each wait for the GIL, storage/inserts.py). The push path asks it inside
# a statement of its own (storage/entries.py); `horizons_of` reads its answer.
HORIZONS_SQL = ("SELECT json_group_array(json_array(j.value, "
                "(SELECT max(max_ts) FROM blocks WHERE stream_id = j.value))) "
                "FROM json_each(?1) j")


def horizons_of(text: str) -> dict[int, int]:
    """HORIZONS_SQL's answer as stream id -> newest timestamp."""
    return {sid: newest for sid, newest in json.loads(text) if newest is not None}


def sealed_duplicates(conn: sqlite3.Connection, stream_id: int, stamps_of: Sequence[int],
                      row_at: Callable[[int], tuple[int, int, str, str | None]]) -> set[int]:
    """Indexes of the rows a sealed block of the stream already holds (same timestamp, line
    and metadata), of rows given as their timestamps and `row_at(index)` ((ts, hash, line,
    metadata) as the ingester prepares them), asked for only where a stored line has the
    row's timestamp: a pack's lines are decoded only then."""
    stamps = sorted(set(stamps_of))
    if not stamps:
        return set()
    held: set[tuple[int, str, str | None]] = set()
    for r in conn.execute(
            "SELECT id, rows, flags, keys, lengths, metadata, lines FROM blocks "
            "WHERE stream_id = ? AND max_ts >= ? AND min_ts <= ?",
            (stream_id, stamps[0], stamps[-1])):
        ts, _ = B.decode_keys(r[3], r[1])
        hits = [i for x in stamps for i in range(bisect_left(ts, x), bisect_right(ts, x))]
        if not hits:
            continue
        lines = B.decode_lines(r[6], B.decode_lengths(r[4]), bool(r[2] & B.FLAG_ASCII))
        mds = B.decode_metadata(r[5], r[1])
        held.update((ts[i], lines[i], mds[i]) for i in hits)
    if not held:
        return set()
    held_at = {h[0] for h in held}
    out = set()
    for i, t in enumerate(stamps_of):
        if t in held_at:
            r = row_at(i)
            if (r[0], r[2], r[3]) in held:
                out.add(i)
    return out


def status(conn: sqlite3.Connection) -> dict[str, int]:
    head = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    packs, packed = conn.execute(
        "SELECT count(*), coalesce(sum(rows), 0) FROM blocks WHERE flags & 4").fetchone()
    blocks, rows, size = conn.execute(
        "SELECT count(*), coalesce(sum(rows), 0), coalesce(sum(bytes), 0) FROM blocks "
        "WHERE NOT flags & 4").fetchone()
    return {"head_rows": head + packed, "head_packs": packs, "blocks": blocks,
            "sealed_rows": rows, "sealed_bytes": size}
