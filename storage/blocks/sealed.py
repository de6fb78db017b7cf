"""Reading sealed blocks: the rows and counts a scan needs, in the shapes the head's SQL gives.

`SealedBlocks` is made once per scan for its streams and time range. It reads the block
summaries once, drops the blocks whose summary proves that no row can pass the scan's
needles and line conditions (the Bloom filter, the backslash flag, the metadata names), and
then answers `rows(lo, hi)` for each window the scan walks through, decoding a block the
first time a window touches it and only the lines of the rows that window takes. Windows
move one way, so only the blocks that reach past the current window stay decoded: a window
that spans hundreds of blocks holds one at a time.

Counts that need no lines (`sealed_range_counts`, `sealed_totals`, `sealed_at`) are in
storage/blocks/counts.py.
"""

from __future__ import annotations

import heapq
import json
import sqlite3
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import Callable, Iterator, Sequence

import numpy as np

from logql.model import Needle
from storage.blocks import codec as B
from storage.blocks.catalog import Summary, summaries

Row = tuple  # (id, stream_id, ts, line, metadata)
# ASCII letters whose Unicode case folding reaches outside ASCII (Kelvin sign, long s)
_FOLD_OUTSIDE_ASCII = frozenset("kKsS")
# blocks this small are fetched PREFETCH_BLOCKS to a statement (SealedBlocks._prefetch)
PREFETCH_MAX_ROWS = 1000
PREFETCH_BLOCKS = 256
# an unordered scan checks the Bloom filters of this many blocks together
ADMIT_BLOCKS = 4096
# Bloom filters up to this size (a block of a few hundred lines) come with the summaries
# (at most storage.blocks.catalog.KEPT_BLOOM_MAX)
BLOOM_PREFETCH_MAX = 4096


class Decoded:
    """One block's columns, each decompressed the first time something asks for it: a
    block that a needle search rules out costs only its lines' decompression."""

    def __init__(self, conn: sqlite3.Connection | None, s: Summary,
                 columns: tuple[bytes, bytes, bytes, bytes] | None = None):
        self.summary = s
        if columns is None:
            assert conn is not None
            columns = conn.execute("SELECT keys, lengths, metadata, lines FROM blocks "
                                   "WHERE id = ?", (s.id,)).fetchone()
        self._keys, self._lengths, self._metadata, self._lines = columns
        # a block fetched by its keys alone (to find which of its rows a window takes)
        # gets the other columns only if it has rows there (SealedBlocks._rows_of)
        self.complete = self._lines is not None
        self._raw: bytes | None = None
        self._text: str | None = None
        self._ts: list[int] | None = None
        self._ids: list[int] | None = None
        self._offsets: list[int] | None = None
        self._md: list[str | None] | None = None
        self.lower: bytes | None = None   # raw with ASCII letters lower-cased

    def fill(self, lengths: bytes, metadata: bytes, lines: bytes) -> None:
        self._lengths, self._metadata, self._lines = lengths, metadata, lines
        self.complete = True

    @property
    def raw(self) -> bytes:
        if self._raw is None:
            self._raw = B._decompress(self._lines)
            self._lines = b""  # the compressed copy is not needed any more
        return self._raw

    @property
    def text(self) -> str | None:
        """raw decoded once, for ASCII-only blocks (byte offsets are then char offsets)."""
        if self._text is None and self.summary.flags & B.FLAG_ASCII:
            self._text = self.raw.decode("ascii")
        return self._text

    @property
    def ts(self) -> list[int]:
        if self._ts is None:
            self._ts, self._ids = B.decode_keys(self._keys, self.summary.rows)
        return self._ts

    @property
    def ids(self) -> list[int]:
        if self._ids is None:
            self._ts, self._ids = B.decode_keys(self._keys, self.summary.rows)
        return self._ids

    @property
    def offsets(self) -> list[int]:
        """line i is raw[offsets[i]:offsets[i + 1]]"""
        if self._offsets is None:
            self._offsets = B.line_offsets(self._lengths, self.summary.rows)
        return self._offsets

    @property
    def metadata(self) -> list[str | None]:
        if self._md is None:
            self._md = B.decode_metadata(self._metadata, self.summary.rows)
        return self._md

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """Row indexes [a, b) with lo <= ts < hi."""
        s = self.summary
        if lo <= s.min_ts and s.max_ts < hi:
            return 0, s.rows
        return bisect_left(self.ts, lo), bisect_left(self.ts, hi)

    def lines(self, a: int, b: int) -> list[str]:
        offs = self.offsets
        if self.text is not None:
            return list(map(self.text.__getitem__, map(slice, offs[a:b], offs[a + 1:b + 1])))
        raw = self.raw
        return [raw[offs[i]:offs[i + 1]].decode("utf-8", "surrogatepass") for i in range(a, b)]

    def line(self, i: int) -> str:
        """Line i, cut from the block's text if something decoded it already, else decoded
        alone: a needle's few hits in a block need not hold the whole block twice, as bytes
        and as text (a full scan for `|~ "[0-9]{6}q"` held 9 MB of such texts at once)."""
        offs = self.offsets
        if self._text is not None:
            return self._text[offs[i]:offs[i + 1]]
        return self.raw[offs[i]:offs[i + 1]].decode("utf-8", "surrogatepass")

    def lines_containing(self, needles: list[tuple[bytes, bool]], a: int, b: int) -> list[int]:
        """Indexes in [a, b) of the lines holding one of the needles (`(bytes, ci)`; ci
        needles are lower-case ASCII), found by searching the block's bytes, not line by
        line: a rare needle costs a few `find` calls per block."""
        whole = a == 0 and b == self.summary.rows
        if whole:
            raw = self.raw
            for needle, ci in needles:
                if ci and self.lower is None:
                    self.lower = raw.lower()
                if needle in (self.lower if ci else raw):
                    break
            else:
                return []  # nothing here: the block's offsets are never even decoded
        offs = self.offsets
        end = offs[b]
        found: set[int] = set()
        for needle, ci in needles:
            if ci and self.lower is None:
                self.lower = self.raw.lower()
            hay = self.lower if ci else self.raw
            n = len(needle)
            pos = hay.find(needle, offs[a], end)
            while pos != -1:
                i = bisect_right(offs, pos) - 1
                if pos + n <= offs[i + 1]:
                    found.add(i)
                    pos = hay.find(needle, offs[i + 1], end)
                else:  # the match runs into the next line: not a match in line i
                    pos = hay.find(needle, pos + 1, end)
        return sorted(found)


def _ids(stream_ids: Sequence[int]) -> str:
    return json.dumps(list(stream_ids))


def _block_columns(conn: sqlite3.Connection, block_ids: Sequence[int],
                   columns: str) -> Iterator[tuple]:
    """(id, *columns) of the blocks, PREFETCH_BLOCKS ids to a statement: thousands of
    streams make thousands of small blocks, and a statement each cost more than decoding."""
    for i in range(0, len(block_ids), PREFETCH_BLOCKS):
        yield from conn.execute(f"SELECT id, {columns} FROM blocks WHERE id IN "
                                "(SELECT value FROM json_each(?))",
                                (_ids(block_ids[i:i + PREFETCH_BLOCKS]),))


# -- which blocks a scan may skip -----------------------------------------------------------

def _probe_clause(clause: Sequence[Needle]) -> list | None:
    """Bloom probes for each alternative of an OR; None when some alternative cannot be
    tested (too short, or case-insensitive beyond ASCII), which makes the clause pass."""
    alts = []
    for text, ci in clause:
        if ci and (not text.isascii() or any(c in _FOLD_OUTSIDE_ASCII for c in text)):
            return None
        probes = B.trigram_probes(text.encode("utf-8", "surrogatepass"))
        if probes is None:
            return None
        alts.append(probes)
    return alts or None


@dataclass
class BlockFilter:
    """What the summaries are checked against: OR-clauses of Bloom probes and the
    `| parser | name="value"` demands of the scan's line conditions."""
    clauses: list[list] = field(default_factory=list)
    label_values: list[tuple[str, list | None]] = field(default_factory=list)

    @classmethod
    def build(cls, needles: Sequence[Sequence[Needle]], conditions) -> "BlockFilter":
        f = cls()
        cnf = [list(c) for c in needles]
        if conditions is not None:
            cnf += [list(c) for c in conditions.all_of]
        for clause in cnf:
            probes = _probe_clause(clause)
            if probes is not None:
                f.clauses.append(probes)
        if conditions is not None:
            for name, value in conditions.label_values:
                f.label_values.append((name, B.trigram_probes(
                    value.encode("utf-8", "surrogatepass"))))
        return f

    def admits(self, s: Summary, bloom: bytes | None) -> bool:
        return bloom is None or bool(self.admits_many([s], [bloom])[0])

    def admits_many(self, found: Sequence[Summary], blooms: Sequence[bytes]) -> np.ndarray:
        """Per block, whether its summary and Bloom filter let a row through."""
        ok = np.ones(len(found), dtype=bool)
        if not self:
            return ok
        probe = B.Blooms(blooms)
        for alts in self.clauses:
            some = np.zeros(len(found), dtype=bool)
            for probes in alts:
                some |= probe.admit(probes)
            ok &= some
        for name, probes in self.label_values:
            if probes is None:
                continue
            # a value may hide behind an escape, or come from the metadata
            exempt = np.fromiter((bool(s.flags & B.FLAG_BACKSLASH) or name in s.md_names
                                  for s in found), dtype=bool, count=len(found))
            ok &= exempt | probe.admit(probes)
        return ok

    def __bool__(self) -> bool:
        return bool(self.clauses or self.label_values)


def _searchable_clause(conditions) -> list[tuple[bytes, bool]] | None:
    """The first OR-clause of the conditions that a byte search can answer: a line passes
    only if it holds one of these (`(bytes, ci)`), so only such lines need decoding."""
    if conditions is None:
        return None
    for clause in conditions.all_of:
        alts = []
        for text, ci in clause:
            if not text or (ci and (not text.isascii()
                                    or any(c in _FOLD_OUTSIDE_ASCII for c in text))):
                alts = []
                break
            alts.append((text.lower().encode() if ci else
                         text.encode("utf-8", "surrogatepass"), ci))
        if alts:
            return alts
    return None


_stream_then_start = attrgetter("stream_id", "min_ts")


class _Ordered:
    """Blocks sorted by their first row, with their bounds and rows as arrays too."""

    def __init__(self, blocks: list[Summary]):
        self.blocks = blocks
        self.starts = [b.min_ts for b in blocks]
        self.first = np.array(self.starts, dtype=np.int64)
        # lists first: numpy's fromiter over a generator cost 3x (20,000 blocks: 25 ms)
        self.last = np.array([b.max_ts for b in blocks], dtype=np.int64)
        self.rows = np.array([b.rows for b in blocks], dtype=np.float64)
        self.longest = int((self.last - self.first).max()) if blocks else 0


class SealedBlocks:
    """The sealed rows of some streams in [start, end) that may pass a scan's conditions."""

    def __init__(self, conn: sqlite3.Connection, stream_ids: Sequence[int], start: int,
                 end: int, *, conditions=None, needles: Sequence[Sequence[Needle]] = ()):
        self.conn = conn
        self.keep: Callable[[str, str | None], bool] | None = (
            conditions.matcher() if conditions is not None else None)
        self.filter = BlockFilter.build(needles, conditions)
        found = summaries(conn, stream_ids, start, end,
                          bloom_max=BLOOM_PREFETCH_MAX if self.filter else 0)
        self.blocks: list[Summary] = [s for s, _ in found]
        self._admitted: dict[int, bool] = {}
        # small blocks' Bloom filters come with their summaries and are checked at once, so
        # the blocks they rule out never enter a window (20,000 quiet pods: one statement,
        # and windows that walk the few blocks left); a large one is read and checked when
        # a window first reaches its block: a limited query that stops after the newest
        # windows never reads the others
        small = [(s, bloom) for s, bloom in found if bloom is not None]
        if small:
            self._admit_by([s for s, _ in small], [b for _, b in small])
        live = [s for s in self.blocks if self._admitted.get(s.id) is not False] \
            if small else self.blocks
        # the blocks windows may take rows from; some may still be ruled out when a window
        # reaches them (_check: `_late_rejects`)
        self._live = live
        self._late_rejects = False
        # per stream, made when a scan first reads one stream (scan_by_stream): an
        # unordered scan of 20,000 streams never does
        self._by_stream: dict[int, list[Summary]] | None = None
        self._cache: dict[int, Decoded] = {}
        self.search = _searchable_clause(conditions)
        # per stream (-1: all): the blocks by their first row
        self._by_start: dict[int, _Ordered] = {}

    def __bool__(self) -> bool:
        return bool(self._live)

    def judges_rarity(self) -> bool:
        """Whether there are blocks enough (64) for mostly_ruled_out to say anything."""
        return len(self.blocks) >= 64

    def mostly_ruled_out(self) -> bool:
        """Whether the summaries and Bloom filters ruled out at least 9 in 10 of 64 or
        more blocks already: the scan's needles are rare in this data."""
        return self.judges_rarity() and len(self._live) * 10 <= len(self.blocks)

    @property
    def skipped(self) -> list[Summary]:
        """The blocks whose summaries ruled them out so far."""
        return [s for s in self.blocks if self._admitted.get(s.id) is False]

    def counts(self, lo: int, hi: int) -> tuple[int, int]:
        """(lines, bytes) of every sealed row of the scan's streams with lo <= ts < hi,
        blocks the summaries ruled out included."""
        return counts_in(self.conn, self.blocks, lo, hi, self._cache)

    def _check(self, fresh: list[Summary]) -> None:
        if not self.filter:
            self._admitted.update((s.id, True) for s in fresh)
            return
        blooms = dict(_block_columns(self.conn, [s.id for s in fresh], "bloom"))
        admitted = self._admit_by(fresh, [blooms.get(s.id, b"") for s in fresh])
        self._late_rejects = self._late_rejects or not admitted.all()

    def _admit_by(self, blocks: list[Summary], blooms: list[bytes]) -> np.ndarray:
        """Records which of the blocks their summaries and Bloom filters let through."""
        admitted = self.filter.admits_many(blocks, blooms)
        self._admitted.update(zip([s.id for s in blocks], admitted.tolist()))
        return admitted

    def estimate(self, lo: int, hi: int, stream_id: int | None = None) -> int:
        """About how many rows `rows(lo, hi, stream_id)` would bring into memory, from the
        summaries (rows spread evenly over each block's time span); 0 when a needle search
        picks the rows, which then are only the lines that hold the needles. As arrays: a
        scan asks this several times per window, of every block the window reaches."""
        if self.search:
            return 0
        o = self._ordered(stream_id)
        i, j = bisect_left(o.starts, lo - o.longest), bisect_left(o.starts, hi)
        first, last, rows = o.first[i:j], o.last[i:j], o.rows[i:j]
        take = last >= lo
        if self._late_rejects:
            take &= np.fromiter((self._admitted.get(s.id) is not False
                                 for s in o.blocks[i:j]), dtype=bool, count=j - i)
        first, last, rows = first[take], last[take], rows[take]
        inside = (np.minimum(hi, last + 1) - np.maximum(lo, first)).astype(np.float64)
        return int(np.floor(rows * inside / (last - first + 1)).sum())

    def cut(self, lo: int, hi: int, stream_id: int | None, backward: bool,
            max_rows: int) -> tuple[int, int]:
        """[lo, hi) narrowed, at its far end from where the scan comes, to the newest (or
        oldest) `max_rows` sealed rows and every row sharing the last one's timestamp, when
        it holds more: thousands of streams' last lines can fall in one instant, where the
        summaries' estimate cannot split them, and only their timestamps are read to find
        the cut, not their lines. Not for needle searches (`estimate` leaves them alone)."""
        if self.search:
            return lo, hi
        reached = self._admit(self._reaching(lo, hi, stream_id))
        if sum(s.rows for s in reached) <= max_rows:
            return lo, hi
        # a block's bounds are rows: one inside the window tells of a row there at least
        # that new (old). If max_rows blocks tell so, the cut lies no further in than the
        # max_rows-th of those rows, and only the blocks reaching past it need their
        # timestamps read (20,000 quiet pods whose last lines fall in one instant: 4,000
        # blocks' keys read instead of 20,000)
        if backward:
            ends = [s.max_ts if s.max_ts < hi else s.min_ts for s in reached]
        else:
            ends = [s.min_ts if s.min_ts >= lo else s.max_ts for s in reached]
        ends = [x for x in ends if lo <= x < hi]
        if len(ends) >= max_rows:
            ends.sort()  # in C; heapq's k-th of 20,000 cost 20x more
            if backward:
                lo = ends[-max_rows]
                reached = [s for s in reached if s.max_ts >= lo]
            else:
                hi = ends[max_rows - 1] + 1
                reached = [s for s in reached if s.min_ts < hi]
        self._prefetch(reached)
        stamps: list[int] = []
        for s in reached:
            d = self._cache.get(s.id)
            if d is None:
                d = self._cache[s.id] = Decoded(self.conn, s)
            a, b = d.span(lo, hi)
            stamps += d.ts[a:b]
        if len(stamps) <= max_rows:
            return lo, hi
        if backward:
            return heapq.nlargest(max_rows, stamps)[-1], hi
        return lo, heapq.nsmallest(max_rows, stamps)[-1] + 1

    def _admit(self, reached: list[Summary]) -> list[Summary]:
        """The blocks the summaries do not rule out (checked the first time one is met)."""
        fresh = [s for s in reached if s.id not in self._admitted]
        if fresh:
            self._check(fresh)
        return [s for s in reached if self._admitted[s.id]]

    def _ordered(self, stream_id: int | None) -> "_Ordered":
        """The blocks (of one stream, or all: -1) by their first row."""
        key = -1 if stream_id is None else stream_id
        o = self._by_start.get(key)
        if o is None:
            if stream_id is None:
                blocks = self._live
            else:
                if self._by_stream is None:
                    self._by_stream = {}
                    for s in self._live:
                        self._by_stream.setdefault(s.stream_id, []).append(s)
                blocks = self._by_stream.get(stream_id, [])
            o = self._by_start[key] = _Ordered(sorted(blocks, key=lambda b: b.min_ts))
        return o

    def _reaching(self, lo: int, hi: int, stream_id: int | None) -> list[Summary]:
        """The blocks with rows possibly in [lo, hi): found by their starts, so a scan of
        many windows over many blocks does not test every block in every window."""
        o = self._ordered(stream_id)
        # only blocks that start less than the longest block's span before `lo` can reach it
        return [s for s in o.blocks[bisect_left(o.starts, lo - o.longest):
                                    bisect_left(o.starts, hi)] if s.max_ts >= lo]

    def _prefetch(self, blocks: list[Summary]) -> None:
        """Fetch the timestamps of small blocks not decoded yet, many to a statement: with
        thousands of streams, a statement per block of a few rows was most of a scan, and
        most blocks a window reaches hold no row of it. Large blocks are still read whole,
        one at a time, when their turn comes."""
        small = {s.id: s for s in blocks
                 if s.rows <= PREFETCH_MAX_ROWS and s.id not in self._cache}
        if len(small) < 2:
            return  # one block is read whole, in one statement, when its turn comes
        for bid, keys in _block_columns(self.conn, list(small), "keys"):
            self._cache[bid] = Decoded(None, small[bid], (keys, None, None, None))

    def _complete(self, decoded: list[Decoded]) -> None:
        """The other columns of the blocks fetched by their keys, many to a statement."""
        partial = {d.summary.id: d for d in decoded if not d.complete}
        for bid, lengths, metadata, lines in _block_columns(self.conn, list(partial),
                                                            "lengths, metadata, lines"):
            partial[bid].fill(lengths, metadata, lines)

    def rows(self, lo: int, hi: int, stream_id: int | None = None) -> list[Row]:
        """Rows with lo <= ts < hi (of one stream, if given) that pass the conditions, in
        block order (each block's rows sorted by (ts, id)); callers sort across blocks."""
        return self._rows_of(self._reaching(lo, hi, stream_id), lo, hi)

    def batches(self, lo: int, hi: int, target_rows: int) -> Iterator[list[Row]]:
        """Every row with lo <= ts < hi that passes, block after block (a stream's blocks
        oldest first) in batches of about `target_rows`: for scans that want no order."""
        chunk: list[Summary] = []
        size = 0
        # no order by start needed (what _reaching keeps for windowed scans): summaries
        # come by stream already, so this sort finds one run
        reached = sorted((s for s in self._live if s.max_ts >= lo and s.min_ts < hi),
                         key=_stream_then_start)
        for i in range(0, len(reached), ADMIT_BLOCKS):
            # the Bloom filters of many blocks at once: numpy's fixed cost per probe was
            # most of checking a batch's few hundred (20,000 blocks: 50 rounds of probes)
            for s in self._admit(reached[i:i + ADMIT_BLOCKS]):
                chunk.append(s)
                size += s.rows
                if size >= target_rows:
                    yield self._rows_of(chunk, lo, hi)
                    chunk, size = [], 0
        if chunk:
            yield self._rows_of(chunk, lo, hi)

    def _rows_of(self, reached: list[Summary], lo: int, hi: int) -> list[Row]:
        out: list[Row] = []
        touched: set[int] = set()
        keep, needles = self.keep, self.search
        reached = self._admit(reached)
        self._prefetch(reached)
        taken: list[tuple[Decoded, int, int]] = []
        for s in reached:
            d = self._cache.get(s.id)
            if d is None:
                d = Decoded(self.conn, s)
            if s.min_ts < lo or s.max_ts >= hi:
                # reaches past this window: the next one reads it again; the others are
                # let go as soon as their rows are out
                touched.add(s.id)
                self._cache[s.id] = d
            a, b = d.span(lo, hi)
            if a < b:
                taken.append((d, a, b))
        self._complete([d for d, _, _ in taken])
        for k, (d, a, b) in enumerate(taken):
            # let go of each block as soon as its rows are out, unless the next window reads
            # it too: a full scan's window took 225 decompressed blocks at once (a worker's
            # memory +52 MB for `|= "qz"`, bench/REPORT.md)
            taken[k] = None  # type: ignore[call-overload]
            if d.summary.id not in touched:
                self._cache.pop(d.summary.id, None)  # prefetched with its keys
            sid = d.summary.stream_id
            if needles:
                hits = d.lines_containing(needles, a, b)
                if hits:
                    ts, ids, md = d.ts, d.ids, d.metadata
                    for i in hits:
                        line = d.line(i)
                        if keep is None or keep(line, md[i]):
                            out.append((ids[i], sid, ts[i], line, md[i]))
                continue
            ts, ids, md = d.ts, d.ids, d.metadata
            rows = zip(ids[a:b], repeat(sid, b - a), ts[a:b], d.lines(a, b), md[a:b])
            if keep is None:
                out.extend(rows)
            else:
                out.extend(r for r in rows if keep(r[3], r[4]))
        for bid in [b for b in self._cache if b not in touched]:
            del self._cache[bid]
        return out


# -- counts of blocks a scan holds ------------------------------------------------------

def counts_in(conn: sqlite3.Connection, found: Sequence[Summary], lo: int,
              hi: int, decoded: dict[int, Decoded] | None = None) -> tuple[int, int]:
    """`decoded`: blocks a scan holds decoded already (the ones its last window cut), whose
    timestamps and offsets are not read again."""
    lines = size = 0
    cut = []
    for s in found:
        if s.max_ts < lo or s.min_ts >= hi:
            continue
        if lo <= s.min_ts and s.max_ts < hi:
            lines += s.rows
            size += s.bytes
            continue
        d = decoded.get(s.id) if decoded else None
        if d is None or not d.complete:
            cut.append(s)
            continue
        a, b = d.span(lo, hi)
        if a < b:
            offsets = d.offsets
            lines += b - a
            size += offsets[b] - offsets[a]
    by_id = {s.id: s for s in cut}
    for bid, keys, lengths in _block_columns(conn, list(by_id), "keys, lengths"):
        n = by_id[bid].rows
        ts = B.decode_keys(keys, n)[0]
        a, b = bisect_left(ts, lo), bisect_left(ts, hi)
        if a < b:
            offsets = B.line_offsets(lengths, n)
            lines += b - a
            size += offsets[b] - offsets[a]
    return lines, size
