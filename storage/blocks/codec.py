"""Sealed blocks: one stream's entries of one time window, compressed column by column.

A block holds the rows `(id, ts, line, metadata)` of one stream, sorted by `(ts, id)`, as
separate zstd-compressed columns, so a reader asks SQLite only for what it needs:

    keys      ts and entry ids, as int64 deltas (little-endian)
    lengths   each line's UTF-8 byte length, uint32: line bytes for the rollup-style
              counts without touching the lines; offsets into `lines`. Byte-shuffled (all
              low bytes, then the second bytes, ...) and marked by a leading 0x01 byte;
              blocks written before issue 25 hold the plain array (a zstd frame, 0x28 first)
    metadata  empty when no row has metadata; else an int32 per row indexing (-1: none) the
              JSON array of the block's distinct metadata texts that follows
    lines     the lines' UTF-8 bytes, concatenated

Beside the columns a block keeps its summary: time bounds, row and byte counts, the entry id
range, whether any line has a backslash (a `| json`/`| logfmt` value may hide behind an escape,
see LineConditions.label_values), the structured-metadata names present, and a Bloom filter
of the (ASCII-lower-cased) byte trigrams of its lines. The summary only ever rules a block out
when no line in it can match; every row read is still checked exactly by the pipeline.
"""

from __future__ import annotations

import json
import math
import struct
import threading
from itertools import accumulate
from dataclasses import dataclass
from typing import Sequence

import msgspec
import numpy as np
import zstandard

from logql.model import MINUTE_NS
from storage.stream_set import sorted_distinct

try:  # the Bloom filter in C (_bloom.c); without it build_bloom's numpy code makes the same
    from storage.blocks import _bloom
except ImportError:  # pragma: no cover - a build without a C compiler
    _bloom = None

ZSTD_LEVEL = 3
# The lines are nearly all of a block. Level 10's parameters make them 16 % smaller than
# level 3 on the realistic set (21.9 -> 18.25 MB; levels 4/5/6/9: 21.0/20.4/19.3/18.55 MB,
# the parameters of level 9/11: 18.4/18.1 MB) for about 5x the compression CPU, which the
# sorted Bloom build paid for; decompression got faster (0.10 -> 0.08 s for the set's 154 MB).
# Parameters, not a level: for an input under 256 KiB (most blocks) a level picks zstd's
# small-input parameters, which did worse here for the same time. Frames of any parameters
# decode the same, so old blocks need nothing.
LINES_ZSTD = zstandard.ZstdCompressionParameters.from_level(10)
# Bloom filter: 5 bits per distinct trigram and 3 probes, about 9 % false positives per
# trigram. A needle is ruled out by any one of its absent trigrams, and on the realistic set
# nearly every block a needle of 5+ bytes is wrongly read for holds all of its trigrams (no
# filter of trigrams can rule it out): going from 10 bits and 5 probes halved the filters
# (3.6 -> 1.8 MB, 0.024 x raw) for a few more blocks read. Blocks written with 5 probes read
# with the first 3 of them (same positions), so their filters still never miss.
BLOOM_BITS_PER_KEY = 5
BLOOM_PROBES = 3
# from this many trigrams on, distinct ones are found with a table rather than a sort
BLOOM_BITMAP_FROM = 128 << 10
_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1

FLAG_BACKSLASH = 1
FLAG_ASCII = 2
# A pack: what one push brought for one stream, stored as it arrived (issue 25). It is a
# block in every way a reader cares about, encoded for the push's speed: lines at zstd level
# 1 and a Bloom filter that rules nothing out (building a real one cost 4.1 of the 5.3 ms per
# 1,000 realistic lines). The sealer merges a window's packs into a full block
# (storage/blocks/sealing.py); until then they are the head.
FLAG_PACK = 4
PACK_LINES_ZSTD_LEVEL = 1
# 64 bits all set: every probe finds its bits (an empty filter would rule every needle out)
ADMIT_ALL_BLOOM = b"\xff" * 8

# A ZstdCompressor must not be used by two threads at once (its output is then corrupt):
# the sealer and the compactor encode blocks on different reader threads.
_local = threading.local()


def _compress(data: bytes, lines: bool = False, pack: bool = False) -> bytes:
    name = "pack_compressor" if pack else "lines_compressor" if lines else "compressor"
    c = getattr(_local, name, None)
    if c is None:
        c = zstandard.ZstdCompressor(level=PACK_LINES_ZSTD_LEVEL) if pack else \
            zstandard.ZstdCompressor(compression_params=LINES_ZSTD) if lines else \
            zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        setattr(_local, name, c)
    return c.compress(data)

_metadata_decoder = msgspec.json.Decoder(dict)

# Before a byte-shuffled column: a zstd frame always starts with 0x28 (its magic number).
# Line lengths are mostly under 64 KiB, so their high bytes are runs of zeros once grouped,
# and zstd does not find that in the interleaved array: the lengths of the realistic set
# went 0.84 -> 0.59 MB.
_SHUFFLED = b"\x01"


def _shuffled(values: np.ndarray) -> bytes:
    planes = np.frombuffer(values.tobytes(), dtype=np.uint8).reshape(-1, values.itemsize)
    return shuffled_column(planes.T.tobytes())


def shuffled_column(planes: bytes) -> bytes:
    """The column of an array given already byte-shuffled (all low bytes, then the second
    bytes, ...), as _unshuffled reads it."""
    return _SHUFFLED + _compress(planes)


def block_flags(body: bytes, ascii_only: bool, pack: bool) -> int:
    """A block's flags from its lines' bytes: FLAG_BACKSLASH, FLAG_ASCII, FLAG_PACK."""
    return (FLAG_BACKSLASH if b"\\" in body else 0) | (FLAG_ASCII if ascii_only else 0) \
        | (FLAG_PACK if pack else 0)


def _unshuffled(data: bytes, width: int) -> bytes:
    """The little-endian array a column holds, shuffled or (blocks before issue 25) not."""
    if data[:1] != _SHUFFLED:
        return _decompress(data)
    raw = _decompress(memoryview(data)[1:])
    n = len(raw) // width
    out = bytearray(len(raw))
    for k in range(width):  # slices, not numpy: most blocks of quiet streams have a few rows
        out[k::width] = raw[k * n:(k + 1) * n]
    return out


@dataclass
class EncodedBlock:
    """What a sealer writes: the summary and the four compressed columns."""
    min_ts: int
    max_ts: int
    rows: int
    bytes: int
    min_id: int
    max_id: int
    flags: int
    aligned: int      # rows whose timestamp is a whole minute (window edges of the rollups)
    md_names: str
    bloom: bytes
    keys: bytes
    lengths: bytes
    metadata: bytes
    lines: bytes


def encode(rows: Sequence[tuple[int, int, str, str | None]], pack: bool = False) -> EncodedBlock:
    """Rows `(id, ts, line, metadata_json_or_None)` of one stream, any order; with `pack`,
    as a pack (see FLAG_PACK)."""
    rows = sorted(rows, key=lambda r: (r[1], r[0]))
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    ts = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    lines = [r[2] for r in rows]
    text = "".join(lines)
    ascii_only = text.isascii()
    if ascii_only:
        body = text.encode("ascii")
        lengths = np.fromiter(map(len, lines), dtype=np.uint32, count=len(lines))
    else:
        parts = [line.encode("utf-8", "surrogatepass") for line in lines]
        body = b"".join(parts)
        lengths = np.fromiter(map(len, parts), dtype=np.uint32, count=len(parts))
    return encode_arrays(ts, ids, lengths, body, ascii_only,
                         metadata_column([r[3] for r in rows]), pack)


def encode_arrays(ts: np.ndarray, ids: np.ndarray, lengths: np.ndarray, body: bytes,
                  ascii_only: bool, metadata: tuple[bytes, str],
                  pack: bool = False) -> EncodedBlock:
    """The block of rows given as columns in block order (time, then id): int64 timestamps
    and ids, uint32 line lengths, the lines' bytes one after another, whether they are all
    ASCII, and `metadata_column`'s column and names."""
    md_column, md_names = metadata
    flags = block_flags(body, ascii_only, pack)
    return EncodedBlock(
        min_ts=int(ts[0]), max_ts=int(ts[-1]), rows=len(ts), bytes=len(body),
        min_id=int(ids.min()), max_id=int(ids.max()), flags=flags,
        aligned=int(np.count_nonzero(ts % MINUTE_NS == 0)),
        md_names=md_names, bloom=ADMIT_ALL_BLOOM if pack else build_bloom(body),
        keys=_compress(np.concatenate([_deltas(ts), _deltas(ids)]).tobytes()),
        lengths=_shuffled(lengths), metadata=md_column,
        lines=_compress(body, lines=True, pack=pack))


def metadata_column(mds: Sequence[str | None]) -> tuple[bytes, str]:
    """The metadata column of rows in block order (b"" when none has metadata: else an
    int32 per row indexing, -1 for none, the JSON array of the distinct texts that follows),
    and the names present, newline-separated. A stream has few distinct sets (its detected
    levels): a dictionary of them and an index per row."""
    distinct = set(mds)
    distinct.discard(None)
    if not distinct:
        return b"", ""
    table = sorted(distinct)
    slot: dict[str | None, int] = {md: i for i, md in enumerate(table)}
    slot[None] = -1
    return metadata_index_column(struct.pack(f"<{len(mds)}i", *map(slot.__getitem__, mds)),
                                 table)


def metadata_index_column(index: bytes, table: list[str]) -> tuple[bytes, str]:
    """metadata_column of rows given as their int32 indexes into `table` (sorted, distinct,
    not empty) and the table."""
    key = tuple(table)
    known = _table_texts.get(key)
    if known is None:
        names: set[str] = set()
        for md in table:
            names.update(_metadata_decoder.decode(md))
        known = (json.dumps(table, ensure_ascii=False).encode("utf-8", "surrogatepass"),
                 "\n".join(sorted(names)))
        if len(_table_texts) >= TABLES_KEPT:
            _table_texts.clear()
        _table_texts[key] = known
    text, names_text = known
    return _compress(index + text), names_text


# A metadata table's JSON text and names, by the table: a stream's few sets (its detected
# levels) come back in every pack, and parsing and writing them each time was a seventh of
# a realistic push's preparation (bench/REPORT.md). Bounded: the texts are the clients'.
_table_texts: dict[tuple[str, ...], tuple[bytes, str]] = {}
TABLES_KEPT = 1024


def _deltas(values: np.ndarray) -> np.ndarray:
    out = np.empty_like(values)
    if len(values):
        out[0] = values[0]
        np.subtract(values[1:], values[:-1], out=out[1:])
    return out


def _decompress(data: bytes) -> bytes:
    # blocks are written with the content size in the frame header. A decompressor is made
    # once per thread (like the compressor, it must not serve two threads at once): making
    # one cost 5x the decompression of a small block's column
    d = getattr(_local, "decompressor", None)
    if d is None:
        d = _local.decompressor = zstandard.ZstdDecompressor()
    return d.decompress(data)


# -- reading ----------------------------------------------------------------------------------

# below this many rows a column is decoded with struct and accumulate: numpy's fixed cost
# per call is several times the work for the few rows of a quiet stream's block
SMALL_ROWS = 64


def decode_keys(data: bytes, rows: int) -> tuple[list[int], list[int]]:
    """(timestamps, entry ids), both in block order."""
    if rows <= SMALL_ROWS:
        deltas = struct.unpack(f"<{2 * rows}q", _decompress(data))
        return list(accumulate(deltas[:rows])), list(accumulate(deltas[rows:]))
    ts, ids = decode_key_arrays(data, rows)
    return ts.tolist(), ids.tolist()


def decode_key_arrays(data: bytes, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps, entry ids) as int64 arrays, both in block order."""
    deltas = np.frombuffer(_decompress(data), dtype=np.int64, count=2 * rows)
    return np.cumsum(deltas[:rows]), np.cumsum(deltas[rows:])


def decode_lengths(data: bytes) -> list[int]:
    return decode_length_array(data).tolist()


def decode_length_array(data: bytes) -> np.ndarray:
    """The lines' byte lengths, uint32."""
    return np.frombuffer(_unshuffled(data, 4), dtype=np.uint32)


def decode_offsets(lengths: bytes, rows: int) -> np.ndarray:
    """Line byte offsets with a leading 0: line i is lines[offsets[i]:offsets[i + 1]]."""
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(decode_length_array(lengths), dtype=np.int64, out=offsets[1:])
    return offsets


def line_offsets(lengths: bytes, rows: int) -> list[int]:
    """decode_offsets as a list (what slicing lines wants)."""
    if rows <= SMALL_ROWS:
        return list(accumulate(struct.unpack(f"<{rows}I", _unshuffled(lengths, 4)),
                               initial=0))
    return decode_offsets(lengths, rows).tolist()


def decode_ts_offsets(keys: bytes, lengths: bytes, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps, line byte offsets) as arrays, for counting."""
    ts = np.cumsum(np.frombuffer(_decompress(keys), dtype=np.int64, count=rows))
    return ts, decode_offsets(lengths, rows)


def decode_metadata(data: bytes, rows: int) -> list[str | None]:
    """Each row's metadata JSON text (None: none), from the dictionary column."""
    if not data:
        return [None] * rows
    raw = _decompress(data)
    index = struct.unpack_from(f"<{rows}i", raw) if rows <= SMALL_ROWS else \
        np.frombuffer(raw, dtype=np.int32, count=rows).tolist()
    return list(map(_table(raw[rows * 4:]).__getitem__, index))


def decode_metadata_index(data: bytes, rows: int) -> tuple[np.ndarray, list[str]]:
    """The metadata column as it is stored: an int32 per row indexing the distinct
    metadata JSON texts (-1: none), and those texts."""
    if not data:
        return np.full(rows, -1, dtype=np.int32), []
    raw = _decompress(data)
    return np.frombuffer(raw, dtype=np.int32, count=rows), _table(raw[rows * 4:])[:-1]


def _table(text: bytes) -> list:
    """The distinct metadata texts a column indexes, None appended (index -1)."""
    table = _tables.get(text)
    if table is None:
        if len(_tables) >= _TABLES_KEPT:
            _tables.clear()
        table = json.loads(text.decode("utf-8", "surrogatepass"))
        table.append(None)
        _tables[text] = table
    return table


# decoded metadata dictionaries by their bytes: a stream's blocks mostly hold the same few
# sets (its detected_level values), and parsing the JSON was most of decoding the column
_tables: dict[bytes, list] = {}
_TABLES_KEPT = 4096


def decode_rows(rows: int, flags: int, keys: bytes, lengths: bytes, metadata: bytes,
                lines: bytes) -> list[tuple[int, int, str, str | None]]:
    """(id, ts, line, metadata text or None) of every row of a block (or pack), in block
    order, from its columns as stored."""
    ts, ids = decode_keys(keys, rows)
    text = decode_lines(lines, decode_lengths(lengths), bool(flags & FLAG_ASCII))
    return list(zip(ids, ts, text, decode_metadata(metadata, rows)))


def decode_lines(data: bytes, lengths: list[int], ascii_only: bool) -> list[str]:
    raw = _decompress(data)
    out: list[str] = []
    pos = 0
    if ascii_only:  # byte offsets are character offsets: one decode, then slices
        text = raw.decode("ascii")
        for n in lengths:
            out.append(text[pos:pos + n])
            pos += n
        return out
    for n in lengths:
        out.append(raw[pos:pos + n].decode("utf-8", "surrogatepass"))
        pos += n
    return out


# -- the trigram Bloom filter -------------------------------------------------------------------

def build_bloom(body: bytes) -> bytes:
    """Bloom filter over the distinct byte trigrams of `body`, ASCII letters folded to lower
    case. Trigrams that span two lines are in it too: they can only add false positives.
    In C where it was built (_bloom.c, the same bytes): a 1 MB block's filter 7.2 -> 1.3 ms,
    the sealer's on the server's interpreter (issue 25)."""
    if _bloom is not None:
        return _bloom.build(body, BLOOM_BITS_PER_KEY, BLOOM_PROBES, _GOLDEN)
    return numpy_bloom(body)


def numpy_bloom(body: bytes) -> bytes:
    """build_bloom without the C module."""
    if len(body) < 3:
        return b""
    b = np.frombuffer(body.lower(), dtype=np.uint8).astype(np.uint32)
    codes = (b[:-2] << 16) | (b[1:-1] << 8) | b[2:]
    if len(codes) >= BLOOM_BITMAP_FROM:
        # distinct by marking a 16 Mi-entry table: linear, where the sort took 125-175 ms
        # of a 20,000-line block's 140-190 ms of sealing (issue 25, packed head)
        seen = np.zeros(1 << 24, dtype=np.bool_)
        seen[codes] = True
        codes = np.flatnonzero(seen).astype(np.uint64)
    else:
        # distinct by sorting: for a small block the table's fixed cost would be most of
        # the work
        codes = sorted_distinct(codes).astype(np.uint64)
    nbits = max(64, int(math.ceil(len(codes) * BLOOM_BITS_PER_KEY / 64)) * 64)
    h = codes * np.uint64(_GOLDEN)
    h1 = h >> np.uint64(32)
    h2 = (h & np.uint64(0xFFFFFFFF)) | np.uint64(1)
    bits = np.zeros(nbits, dtype=np.uint8)
    m = np.uint64(nbits)
    for i in range(BLOOM_PROBES):
        bits[(h1 + np.uint64(i) * h2) % m] = 1
    return np.packbits(bits, bitorder="little").tobytes()


def trigram_probes(text: bytes) -> list[tuple[int, int]] | None:
    """(h1, h2) of each distinct trigram of a needle, for `bloom_admits`; None when the
    needle is too short to say anything."""
    low = text.lower()
    if len(low) < 3:
        return None
    out = []
    for code in {(low[i] << 16) | (low[i + 1] << 8) | low[i + 2] for i in range(len(low) - 2)}:
        h = (code * _GOLDEN) & _MASK64
        out.append((h >> 32, (h & 0xFFFFFFFF) | 1))
    return out


def bloom_admits(bloom: bytes, probes: list[tuple[int, int]]) -> bool:
    """False only if some trigram of the needle is certainly absent from the block."""
    return bool(Blooms([bloom]).admit(probes)[0])


class Blooms:
    """The Bloom filters of many blocks, probed together: thousands of quiet streams make
    thousands of blocks of a few rows, and a probe per block in Python cost more than
    searching the block's lines did; as arrays, all of them cost a few numpy calls."""

    def __init__(self, blooms: Sequence[bytes]):
        sizes = np.fromiter(map(len, blooms), dtype=np.int64, count=len(blooms))
        # one spare byte, so that the index of an empty filter stays in bounds
        self._bits = np.frombuffer(b"".join(blooms) + b"\0", dtype=np.uint8)
        self._base = np.zeros(len(blooms), dtype=np.int64)
        np.cumsum(sizes[:-1], out=self._base[1:])
        # a block with fewer than 3 bytes of text holds no trigram at all
        self._empty = sizes == 0
        self._nbits = np.where(self._empty, 8, sizes * 8).astype(np.uint64)

    def admit(self, probes: list[tuple[int, int]]) -> np.ndarray:
        """Per block, False only if some trigram of the needle is certainly absent."""
        ok = ~self._empty
        for h1, h2 in probes:
            for i in range(BLOOM_PROBES):
                pos = (np.uint64((h1 + i * h2) & _MASK64) % self._nbits).astype(np.int64)
                ok &= ((self._bits[self._base + (pos >> 3)] >> (pos & 7)) & 1).astype(bool)
                if not ok.any():
                    return ok
        return ok
