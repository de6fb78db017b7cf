"""Packs, the head (issue 25): a push's lines of one stream as one `blocks` row flagged
FLAG_PACK, in the block format (storage/blocks/codec.py) with lines at zstd level 1 and a
Bloom filter that rules nothing out.

A pack is encoded where the push is validated (services/ingest/prepare.py: in a query worker
for a large push, so on the second core), all but its entry ids, which only the writer hands
out: `encode_rows` keeps the order in which the rows sort by time (stable, so equal
timestamps keep their arrival order) as id deltas, and the writer's `PackParts.block(first
id)` puts the first id in front and compresses the keys, a few microseconds. Encoding a
pack in the writer instead cost more of the server's interpreter than the rows' inserts it
replaced (1,000 realistic lines: 19.1 against 16.7 ms of CPU).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np

from logql.model import MINUTE_NS
from storage.blocks import codec as B


@dataclass
class PackParts:
    """A pack without its entry ids."""
    min_ts: int
    max_ts: int
    rows: int
    bytes: int
    flags: int
    aligned: int
    md_names: str
    ts_deltas: bytes      # int64 little-endian, the keys column's first half
    first_order: int      # the sorted rows' positions among the rows as given, as deltas:
    order_deltas: bytes   # the first alone, the rest int64 little-endian
    lengths: bytes
    metadata: bytes
    lines: bytes

    def __reduce__(self):
        # pickled by a query worker for the server: the fields in order, not a dict of
        # them (a realistic push has 30 packs)
        return (PackParts, (self.min_ts, self.max_ts, self.rows, self.bytes, self.flags,
                            self.aligned, self.md_names, self.ts_deltas, self.first_order,
                            self.order_deltas, self.lengths, self.metadata, self.lines))

    def block(self, first_id: int) -> B.EncodedBlock:
        """The pack with entry ids first_id, first_id + 1, ... in the order the rows were
        given (writer)."""
        keys = self.ts_deltas + struct.pack("<q", first_id + self.first_order) + self.order_deltas
        return B.EncodedBlock(
            min_ts=self.min_ts, max_ts=self.max_ts, rows=self.rows, bytes=self.bytes,
            min_id=first_id, max_id=first_id + self.rows - 1, flags=self.flags,
            aligned=self.aligned, md_names=self.md_names, bloom=B.ADMIT_ALL_BLOOM,
            keys=B._compress(keys), lengths=self.lengths, metadata=self.metadata,
            lines=self.lines)


def encode_rows(rows: Sequence[tuple[int, int, str, str | None]]) -> PackParts:
    """A stream's rows (ts, hash, line, metadata text or None), in arrival order, as a pack
    but for its ids."""
    return encode_columns([r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows])


def encode_columns(ts: Sequence[int], lines: Sequence[str],
                   mds: Sequence[str | None]) -> PackParts:
    """`encode_rows` of rows given as columns, in arrival order. Python lists and struct, not
    numpy: a push's pack per stream holds a few dozen rows, where numpy's fixed cost per call
    was most of the encoding."""
    n = len(ts)
    if any(b < a for a, b in zip(ts, ts[1:])):
        order = sorted(range(n), key=ts.__getitem__)  # stable: equal times keep arrival order
        ts = [ts[i] for i in order]
        lines = [lines[i] for i in order]
        mds = [mds[i] for i in order]
        order_deltas = struct.pack(f"<{n - 1}q", *[b - a for a, b in zip(order, order[1:])])
        first_order = order[0]
    else:
        order_deltas, first_order = _ones(n - 1), 0
    text = "".join(lines)
    ascii_only = text.isascii()
    if ascii_only:
        body = text.encode("ascii")
        sizes = list(map(len, lines))
    else:
        parts = [line.encode("utf-8", "surrogatepass") for line in lines]
        body = b"".join(parts)
        sizes = list(map(len, parts))
    metadata, names = _metadata_column(mds)
    return PackParts(
        min_ts=ts[0], max_ts=ts[-1], rows=n, bytes=len(body),
        flags=B.block_flags(body, ascii_only, pack=True),
        aligned=sum(1 for t in ts if t % MINUTE_NS == 0), md_names=names,
        ts_deltas=struct.pack(f"<{n}q", ts[0], *[b - a for a, b in zip(ts, ts[1:])]),
        first_order=first_order, order_deltas=order_deltas,
        lengths=B._shuffled(np.array(sizes, dtype=np.uint32)), metadata=metadata,
        lines=B._compress(body, lines=True, pack=True))


_ONES: dict[int, bytes] = {}


def _ones(n: int) -> bytes:
    """n int64 ones: the id deltas of rows that arrived in time order."""
    got = _ONES.get(n)
    if got is None:
        got = struct.pack(f"<{n}q", *([1] * n))
        if len(_ONES) < 4096:
            _ONES[n] = got
    return got


# (the one metadata text of every row, rows) -> (column, names): a stream's lines mostly
# carry the same detected level and nothing else, so a push's packs repeat a few columns
_SAME: dict[tuple[str, int], tuple[bytes, str]] = {}


def _metadata_column(mds: list[str | None]) -> tuple[bytes, str]:
    """codec.metadata_column, kept for rows that all carry one text."""
    first = mds[0]
    if first is not None and mds.count(first) == len(mds):
        got = _SAME.get((first, len(mds)))
        if got is None:
            got = B.metadata_column(mds)
            if len(_SAME) >= 4096:
                _SAME.clear()
            _SAME[(first, len(mds))] = got
        return got
    return B.metadata_column(mds)


class StoredPack(NamedTuple):
    """A pack as the `blocks` table holds it: what sealing reads of it."""
    id: int
    rows: int
    flags: int
    min_ts: int
    max_ts: int
    max_id: int
    keys: bytes
    lengths: bytes
    metadata: bytes
    lines: bytes


def seal_packs(packs: Sequence[StoredPack]) -> B.EncodedBlock | None:
    """The block that codec.encode makes of the packs' rows, made from their columns, or None
    when a pack's oldest line is not newer than the previous pack's newest: only then are the
    rows in block order (time, then id) pack after pack. A stream's pushes mostly follow one
    another in time, and sealing them by their rows cost a tuple and a string per line,
    sorted twice: 3.2 us a row, about half of it Python (bench/REPORT.md)."""
    if any(b.min_ts <= a.max_ts for a, b in zip(packs, packs[1:])):
        return None
    keys = [B.decode_key_arrays(p.keys, p.rows) for p in packs]
    ts = np.concatenate([k[0] for k in keys])
    ids = np.concatenate([k[1] for k in keys])
    lengths = np.concatenate([B.decode_length_array(p.lengths) for p in packs])
    body = b"".join(B._decompress(p.lines) for p in packs)
    return B.encode_arrays(ts, ids, lengths, body, all(p.flags & B.FLAG_ASCII for p in packs),
                           _metadata_of(packs))


def _metadata_of(packs: Sequence[StoredPack]) -> tuple[bytes, str]:
    """The metadata column of the packs' rows one after another: each pack's indexes moved
    into the table of all their texts."""
    columns = [B.decode_metadata_index(p.metadata, p.rows) for p in packs]
    table = sorted({text for _, texts in columns for text in texts})
    if not table:
        return b"", ""
    slot = {text: i for i, text in enumerate(table)}
    # index -1 (no metadata) picks the -1 appended last
    index = np.concatenate([np.array([slot[t] for t in texts] + [-1], dtype=np.int32)[idx]
                            for idx, texts in columns])
    return B.metadata_index_column(index.astype("<i4").tobytes(), table)
