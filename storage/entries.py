"""Appending log entries to the head (writer thread) and keeping the per-minute rollups in step.

What a push brings for a stream, from PACK_MIN_ROWS lines on, is one row of the `blocks`
table, a pack (storage/blocks/codec.py FLAG_PACK, encoded by the preparer), not a row per
line: SQLite's work per line (an index entry, a row, later its delete) was about half of the
server's work per pushed line (issue 25). Fewer lines are rows of the `entries` table, where
a pack's fixed costs would outweigh theirs. Both are the head, which the sealer merges into
blocks.

Exact duplicates (same stream, timestamp, line and metadata) are stored once: repeats within
a push are dropped here, and a line no newer than the stream's newest stored line is first
looked up in the packs and blocks that cover its timestamp."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from itertools import chain, count, repeat
from typing import Iterable, Iterator

from logql.model import MINUTE_NS
from storage.blocks import codec as B, sealing
from storage import sqlbatch
from storage.blocks.catalog import block_statements
from storage.blocks.packs import PackParts, encode_columns, encode_rows
from storage.inserts import execute_values, values_statements
from storage.row_columns import RowColumns, ts_range
from storage.stream_ids import StreamIds
from storage.streams import stream_ids_for, stream_range_statements

DEFAULT_WINDOW_NS = 3600 * 10**9  # storage.block_window's default


@dataclass
class PreparedStream:
    """Entries of one stream that passed validation, ready for one executemany."""
    labels: dict[str, str]
    canonical: str
    # (ts, hash, line, metadata_json_or_None)
    rows: list[tuple[int, int, str, str | None]] = field(default_factory=list)
    first_ts: int = 0
    last_ts: int = 0
    size: int = 0  # UTF-8 bytes of the rows' lines (what the rate limits count)
    # (minute, metadata text or '') -> [lines, bytes] of the rows, added up as they were
    # validated (`tally`); None when the rows came another way: the append then counts them
    tallies: dict[tuple[int, str], list[int]] | None = None
    # the rows as a pack but for its ids (`pack_rows`), when the preparer made one
    pack: PackParts | None = None
    repeats: int = 0  # rows `pack_rows` dropped as repeats within the push

    def __reduce__(self):
        # pickled by a query worker for the server: a pack's rows go as columns, made into
        # tuples only if the server reads them (storage/row_columns.py); the tallies as one
        # flat tuple, not a tuple and a list each (unpickled on the server's interpreter)
        rows = self.rows
        if self.pack is not None and type(rows) is list:
            rows = RowColumns.of(rows, self.pack)
        # (minute, md), [lines, bytes], ... flattened in C: minute, md, lines, bytes, ...
        flat = None if self.tallies is None else \
            tuple(chain.from_iterable(chain.from_iterable(self.tallies.items())))
        return (_unpickled_stream, (self.labels, self.canonical, rows, self.first_ts,
                                    self.last_ts, self.size, flat, self.pack, self.repeats))


def _unpickled_stream(labels: dict[str, str], canonical: str, rows, first_ts: int,
                      last_ts: int, size: int, flat: tuple | None, pack: PackParts | None,
                      repeats: int) -> PreparedStream:
    tallies = None if flat is None else \
        {(flat[i], flat[i + 1]): [flat[i + 2], flat[i + 3]] for i in range(0, len(flat), 4)}
    return PreparedStream(labels, canonical, rows, first_ts, last_ts, size, tallies, pack,
                          repeats)


def pack_rows(ps: PreparedStream) -> None:
    """From PACK_MIN_ROWS rows on, drop their repeats within the push and encode them as a
    pack (the preparer's last step, in a query worker for a large push): the writer then
    only gives ids. Fewer become `entries` rows, whose unique key leaves repeats out."""
    if len(ps.rows) < PACK_MIN_ROWS or ps.pack is not None:  # fewer, or packed already
        return
    if isinstance(ps.rows, RowColumns) and ps.rows.without_repeats():
        ps.pack = ps.rows.pack = encode_columns(ps.rows.ts, ps.rows.lines(),
                                                ps.rows.md_texts())
        return
    rows = _without_repeats(list(ps.rows))
    if len(rows) != len(ps.rows):
        ps.repeats += len(ps.rows) - len(rows)
        ps.rows = rows
        if ps.tallies is not None:
            ps.tallies = tally_rows(rows)
    ps.pack = encode_rows(rows)


def tally(tallies: dict[tuple[int, str], list[int]], timestamps: Iterable[int],
          md_texts: Iterable[str | None], sizes: Iterable[int]) -> None:
    """Rows added to a stream's rollup totals (the minute floored, also before 1970, as
    Python's % does)."""
    get = tallies.get
    for ts, md, size in zip(timestamps, md_texts, sizes):
        key = (ts - ts % MINUTE_NS, md or "")
        counts = get(key)
        if counts is None:
            tallies[key] = [1, size]
        else:
            counts[0] += 1
            counts[1] += size


def tally_rows(rows: list[tuple[int, int, str, str | None]]
               ) -> dict[tuple[int, str], list[int]]:
    """The rollup totals of rows (ts, hash, line, metadata text or None), as `tally` adds
    them up."""
    tallies: dict[tuple[int, str], list[int]] = {}
    tally(tallies, (r[0] for r in rows), (r[3] for r in rows),
          (len(r[2].encode("utf-8", "surrogatepass")) for r in rows))
    return tallies


@dataclass
class AppendResult:
    inserted: int = 0
    duplicates: int = 0
    # (stream id, oldest timestamp offered) per stream: which windows the sealer must seal
    # (a stream whose lines were all duplicates is named too: the sealer looks needlessly)
    firsts: list[tuple[int, int]] = field(default_factory=list)
    # the stream of each pack written (the sealer counts a window's packs)
    packed: list[int] = field(default_factory=list)
    # (stream id, canonical labels, labels, rows actually offered) per stream: for live tail
    written: list[tuple[int, dict[str, str], list[tuple[int, int, str, str | None]]]] = \
        field(default_factory=list)


# A stream's lines of a push become a pack from this many on; fewer become `entries` rows.
PACK_MIN_ROWS = 32
INSERT_ENTRIES = ("INSERT OR IGNORE INTO entries (id, stream_id, ts, hash, line, metadata) "
                  "VALUES {values}")
# The `entries` rows this append inserted (ids above the previous maximum), each folded into
# its rollup by SQLite itself, when a repeat was left out and the tallies no longer hold.
ROLLUP_NEW_ROWS = (
    "INSERT INTO rollups (stream_id, minute, metadata, lines, bytes) "
    "SELECT stream_id, ts - ((ts % ?1) + ?1) % ?1, coalesce(metadata, ''), 1, "
    "length(CAST(line AS BLOB)) FROM entries NOT INDEXED WHERE id > ?2 "
    "ON CONFLICT (stream_id, minute, metadata) DO UPDATE "
    "SET lines = lines + excluded.lines, bytes = bytes + excluded.bytes")
# Totals a push tallied while it was validated, a row per stream, minute and metadata.
ADD_TALLIES = (
    "INSERT INTO rollups (stream_id, minute, metadata, lines, bytes) VALUES {values} "
    "ON CONFLICT (stream_id, minute, metadata) DO UPDATE "
    "SET lines = lines + excluded.lines, bytes = bytes + excluded.bytes")


def newest_head_id(conn: sqlite3.Connection) -> int:
    """The highest entry id given so far (0 when none): seal_state.max_id, which every push
    raises past the ids it gave, or a higher `entries` row of a database from before
    migration 0010."""
    return conn.execute(f"SELECT (SELECT {NEWEST_ID} FROM seal_state WHERE id = 1)"
                        ).fetchone()[0]


# newest_head_id's value, over seal_state's row (the push path asks it in a statement of
# its own)
NEWEST_ID = "max((SELECT coalesce(max(id), 0) FROM entries), max_id)"


def _without_repeats(rows: list[tuple[int, int, str, str | None]]) -> list:
    """The rows without exact repeats within the push (same timestamp and content hash, the
    unique key of `entries`), the first of each kept."""
    keys = set(zip([r[0] for r in rows], [r[1] for r in rows]))
    if len(keys) == len(rows):
        return rows
    seen: set[tuple[int, int]] = set()
    out = []
    for r in rows:
        key = (r[0], r[1])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _per_window(rows: list, window_ns: int) -> list[list]:
    """A stream's rows of a push, split by the sealer's window (most pushes hold one): a
    pack holds one window's lines, so the window's block is sealed from its packs alone."""
    first, last = ts_range(rows)
    if first - first % window_ns == last - last % window_ns:
        return [rows]
    parts: dict[int, list] = {}
    for r in rows:
        parts.setdefault(r[0] - r[0] % window_ns, []).append(r)
    return list(parts.values())


def append(conn: sqlite3.Connection, ids: StreamIds, tenant: str,
           streams: list[PreparedStream], window_ns: int = DEFAULT_WINDOW_NS) -> AppendResult:
    """Store a push (writer, inside its transaction). Per stream, the rows no stored line
    repeats become, from PACK_MIN_ROWS of them, a pack per window (the sealer's
    `storage.block_window`), sorted by time with entry ids in arrival order among equal
    timestamps; fewer become `entries` rows. The rollups get the push's tallies."""
    result = AppendResult()
    streams = [ps for ps in streams if ps.rows]
    if not streams:
        return result
    # what the push needs to know, in one statement (each step waits for the GIL): the ids
    # given so far, whether the head has `entries` rows at all, and the newest stored line
    # of each stream that exists already (streams made below have none)
    known = ids.of_tenant(conn, tenant)
    older = list(dict.fromkeys(known[ps.canonical] for ps in streams if ps.canonical in known))
    newest, last_block_id, has_entries, horizons_text = conn.execute(
        f"SELECT {NEWEST_ID}, last_block_id, "
        f"EXISTS (SELECT 1 FROM entries), ({sealing.HORIZONS_SQL}) "
        "FROM seal_state WHERE id = 1", (json.dumps(older),)).fetchone()
    first_id = next_id = newest + 1
    sids, created = stream_ids_for(conn, ids, tenant, streams)
    horizons = sealing.horizons_of(horizons_text)
    in_entries = _held_in_entries(conn, [(sid, ps.rows) for sid, ps in zip(sids, streams)
                                         if sid not in created
                                         and len(ps.rows) >= PACK_MIN_ROWS]) \
        if has_entries else {}
    packs: list[tuple[int, B.EncodedBlock]] = []
    tallies: list[tuple[int, int, str, int, int]] = []
    entry_rows: list[Iterator[tuple]] = []
    entry_tallies: list[tuple[int, int, str, int, int]] | None = []
    offered = 0
    for sid, ps in zip(sids, streams):
        rows = ps.rows if ps.pack is not None or len(ps.rows) < PACK_MIN_ROWS \
            else _without_repeats(ps.rows)
        offered += len(ps.rows) + ps.repeats
        horizon = horizons.get(sid)
        if horizon is not None and ts_range(rows)[0] <= horizon:
            # a line at or before the stream's newest stored one may repeat a stored line;
            # a packed stream's lines are decoded only for a timestamp a stored line has
            stamps = rows.ts if isinstance(rows, RowColumns) else [r[0] for r in rows]
            older_rows = [i for i, t in enumerate(stamps) if t <= horizon]
            held = sealing.sealed_duplicates(conn, sid, [stamps[i] for i in older_rows],
                                             lambda k: rows[older_rows[k]])
            if held:
                drop = {older_rows[i] for i in held}
                rows = [r for i, r in enumerate(rows) if i not in drop]
        small = len(rows) < PACK_MIN_ROWS
        held = in_entries.get(sid)
        if held and not small:
            rows = [r for r in rows if (r[0], r[1]) not in held]
        result.written.append((sid, ps.labels, rows))
        result.firsts.append((sid, ps.first_ts))
        if not rows:
            continue
        counted = ps.tallies if ps.tallies is not None and len(rows) == len(ps.rows) else None
        if small:
            # a few lines: a row each costs less than a pack's fixed costs, to write and to
            # read (issue 22: 500 new streams of 10 lines to a push took twice as long)
            entry_rows.append(zip(count(next_id), repeat(sid), *zip(*rows)))
            next_id += len(rows)
            if counted is None:
                entry_tallies = None  # SQLite counts the rows
            elif entry_tallies is not None:
                entry_tallies.extend((sid, minute, md, lines, size)
                                     for (minute, md), (lines, size) in counted.items())
            continue
        if counted is None:
            counted = tally_rows(rows)
        tallies.extend((sid, minute, md, lines, size)
                       for (minute, md), (lines, size) in counted.items())
        pack = ps.pack
        if pack is not None and len(rows) == len(ps.rows) and \
                pack.min_ts - pack.min_ts % window_ns == pack.max_ts - pack.max_ts % window_ns:
            packs.append((sid, pack.block(next_id)))
            next_id += len(rows)
        else:  # repeats of stored lines left out, or a push spanning windows
            for part in _per_window(rows, window_ns):
                # ids in arrival order; the codec sorts by (ts, id): equal timestamps keep it
                packs.append((sid, B.encode([(i, r[0], r[2], r[3])
                                             for i, r in zip(count(next_id), part)],
                                            pack=True)))
                next_id += len(part)
        result.inserted += len(rows)
    if entry_rows:
        offered_rows = next_id - first_id - sum(b.rows for _, b in packs)
        before = conn.total_changes
        execute_values(conn, INSERT_ENTRIES, 6, chain.from_iterable(entry_rows))
        inserted = conn.total_changes - before
        result.inserted += inserted
        # tallies only when every row went in (the table's unique key leaves repeats out) and
        # they are at most half as many as the rows: a tally costs about 2.9 us bound from
        # Python, a row counted by SQLite 1.2 us, and many new streams with a line or two a
        # minute each have about as many tallies as rows
        if inserted == offered_rows and entry_tallies is not None \
                and 2 * len(entry_tallies) <= inserted:
            tallies.extend(entry_tallies)
        elif inserted:
            conn.execute(ROLLUP_NEW_ROWS, (MINUTE_NS, first_id - 1))
    result.duplicates = offered - result.inserted
    result.packed = [sid for sid, _ in packs]
    # the rest in one call, the GIL given up once (storage/sqlbatch.py)
    sqlbatch.run(conn, [
        *block_statements(packs, last_block_id, max_id=next_id - 1),
        *stream_range_statements([(ps.first_ts, ps.last_ts, sid)
                                  for sid, ps in zip(sids, streams) if sid not in created]),
        *values_statements(ADD_TALLIES, 5, tallies)])
    return result


def _held_in_entries(conn: sqlite3.Connection, streams: list[tuple[int, list]]
                     ) -> dict[int, set[tuple[int, int]]]:
    """Stream id -> the (timestamp, hash) keys its `entries` rows hold within the time range
    of the given rows, for streams that have any: a stream's small pushes are rows there, its
    large ones packs, and a pack must not repeat a row. One statement for every stream of the
    push, answered in one row (see storage/inserts.py: each step waits for the GIL)."""
    if not streams:
        return {}
    ranges = [(sid, *ts_range(rows)) for sid, rows in streams]
    text = conn.execute(
        "SELECT json_group_array(json_array(e.stream_id, e.ts, e.hash)) "
        "FROM json_each(?) j CROSS JOIN entries e "
        "WHERE e.stream_id = j.value ->> 0 AND e.ts >= j.value ->> 1 "
        "AND e.ts <= j.value ->> 2", (json.dumps(ranges),)).fetchone()[0]
    held: dict[int, set[tuple[int, int]]] = {}
    for sid, ts, h in json.loads(text):
        held.setdefault(sid, set()).add((ts, h))
    return held
