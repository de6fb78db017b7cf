"""A push's streams as columns (issue 25): what `_pushcolumns.c` reads of a JSON push body,
and a stream's pack made from them without a Python object per line.

The common push (Loki's JSON, every entry `[timestamp, line]`, 30 streams of about 33 lines
in the realistic set) was decoded into a str per line, then validated, hashed, tallied and
encoded a line at a time around C-backed steps: 2.9 ms of a query worker's CPU per 1,000
lines, most of it Python's fixed costs per stream and per line (bench/REPORT.md). Here a
body is read in one C call into one buffer of line bytes per stream, and a stream that
becomes a pack gets its levels, hashes, tallies and the pack's columns in a second one.
Anything else (a stream the Python code must see line by line: an entry refused, a line a
level scan leaves to msgspec, a repeat within the push) takes the path it always took, from
`ColumnStream.entries`.
"""

from __future__ import annotations

from array import array
from itertools import repeat
from typing import NamedTuple

from logql.model import MINUTE_NS
from storage.blocks import codec as B
from storage.blocks.packs import PackParts
from storage.row_columns import RowColumns

try:  # the JSON body and a stream's pack in C; without it decode.py reads every body
    from services.ingest import _pushcolumns as pushcolumns
except ImportError:  # pragma: no cover - a checkout whose C files did not build
    pushcolumns = None


class ColumnStream:
    """One stream of a push as the C readers give it (`_pushcolumns.json_push`,
    `_pushproto.columns`): a RawStream's label pairs, timestamps (int64), the lines' UTF-8
    bytes joined and each one's end (uint32). `entries` is a RawStream's, made when asked
    for."""

    __slots__ = ("labels", "ts", "text", "ends", "ascii", "min_ts", "max_ts", "longest",
                 "_entries")

    def __init__(self, labels: list[tuple[str, str]], ts: bytes, text: bytes, ends: bytes,
                 ascii_only: bool, min_ts: int, max_ts: int, longest: int) -> None:
        self.labels, self.ts, self.text, self.ends = labels, ts, text, ends
        self.ascii, self.min_ts, self.max_ts, self.longest = ascii_only, min_ts, max_ts, longest
        self._entries: list | None = None

    @property
    def rows(self) -> int:
        return len(self.ts) // 8

    @property
    def entries(self) -> list[tuple[int, str, None]]:
        if self._entries is None:
            ends = array("I", self.ends)
            starts = [0, *ends[:-1]]
            if self.ascii:
                text = self.text.decode("ascii")
                lines = [text[a:b] for a, b in zip(starts, ends)]
            else:
                data = self.text
                lines = [data[a:b].decode() for a, b in zip(starts, ends)]
            self._entries = list(zip(array("q", self.ts), lines, repeat(None)))
        return self._entries


def read_json(body: bytes, ts_min: int, ts_max: int) -> list[ColumnStream] | None:
    """The body's streams as columns, or None for a body decode.py must read."""
    if pushcolumns is None:
        return None
    read = pushcolumns.json_push(body, ts_min, ts_max)
    if read is None:
        return None
    # a name sent twice keeps its first place and its last value, as msgspec's dict
    return [ColumnStream(list(dict(pairs).items()), *rest) for pairs, *rest in read]


class Packed(NamedTuple):
    rows: RowColumns
    tallies: dict[tuple[int, str], list[int]]


def pack_stream(cols: ColumnStream, md: str | None, detect: tuple | None) -> Packed | None:
    """The stream's rows as a pack (storage/blocks/packs.py encode_columns, the same bytes),
    every row's metadata `md`, or with `detect` (LevelDetector.native_args) its line's
    detected level; None when a line is the Python code's to look at."""
    got = pushcolumns.pack(cols.ts, cols.text, cols.ends, md, detect, MINUTE_NS)
    if got is None:
        return None
    hashes, tallies, aligned, ts_deltas, first_order, order_deltas, body, planes, index, \
        texts = got
    metadata, names = B.metadata_index_column(index, texts) if texts else (b"", "")
    pack = PackParts(
        min_ts=cols.min_ts, max_ts=cols.max_ts, rows=cols.rows, bytes=len(body),
        flags=B.block_flags(body, cols.ascii, pack=True), aligned=aligned, md_names=names,
        ts_deltas=ts_deltas, first_order=first_order, order_deltas=order_deltas,
        lengths=B.shuffled_column(planes), metadata=metadata,
        lines=B._compress(body, lines=True, pack=True))
    rows = RowColumns(array("q", cols.ts), array("q", hashes), None, None, pack=pack)
    return Packed(rows, tallies)
