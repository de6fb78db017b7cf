"""A packed stream's rows as columns (issue 25).

A push is validated a stream at a time, a column at a time (timestamps, hashes, lines,
metadata texts). A stream that becomes a pack needs no row tuples: the pack is encoded from
the columns, and the writer reads only the count and the time range unless a line may repeat
a stored one. Made into tuples anyway, then pickled back from the query worker that prepared
the push, 1,000 realistic lines cost the worker 0.4 ms to make and 0.3-0.5 ms to pickle, and
the server 0.5-0.8 ms to unpickle on the interpreter whose GIL the writer and the event
loop wait for. `RowColumns` holds the columns, pickles them as six objects (timestamps,
hashes, the lines joined, their lengths, the distinct metadata texts and an index into them)
and makes the tuples only when something reads a row (a live tail, a line that may repeat a
stored one, a refused stream's byte count).

A stream whose rows were also encoded as a pack (storage/blocks/packs.py) is pickled as its
timestamps and hashes alone, with the pack, from which its lines and metadata texts are
decoded should the server read them: the writer stores the pack and seldom reads a line, and
the lines pickled beside it were 190 of a realistic push's 232 KB and 0.30 of the worker's
0.47 ms to pickle it (bench/REPORT.md).
"""

from __future__ import annotations

import struct
from array import array
from itertools import accumulate, repeat
from typing import TYPE_CHECKING, Iterator, Sequence

from storage.blocks import codec as B

if TYPE_CHECKING:
    from storage.blocks.packs import PackParts

Row = tuple[int, int, str, "str | None"]


class RowColumns(Sequence):
    """Rows `(ts, hash, line, metadata text or None)` in their order, as columns."""

    __slots__ = ("ts", "hashes", "_lines", "_text", "_lengths", "_mds", "_rows", "pack")

    def __init__(self, ts: Sequence[int], hashes: Sequence[int], lines: Sequence[str] | None,
                 mds: Sequence[str | None] | None, text: str = "", lengths: bytes = b"",
                 pack: PackParts | None = None) -> None:
        self.ts, self.hashes = ts, hashes
        # lines None: `text` cut at `lengths`, or (with mds None too) decoded from `pack`
        self._lines, self._mds = lines, mds
        self._text, self._lengths = text, lengths
        self._rows: list[Row] | None = None
        self.pack = pack  # these rows, in this order, encoded as a pack (pickled as such)

    @classmethod
    def of(cls, rows: Sequence[Row], pack: PackParts | None = None) -> "RowColumns":
        return cls([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                   [r[3] for r in rows], pack=pack)

    def __reduce__(self):
        if self.pack is not None:
            return (_unpickled_packed, (array("q", self.ts).tobytes(),
                                        array("q", self.hashes).tobytes(), self.pack))
        lines = self.lines()
        texts = self.md_texts()
        distinct = tuple(dict.fromkeys(texts))
        if len(distinct) <= 1:
            index = b""  # every row has the one text (or None)
        else:
            number = {md: k for k, md in enumerate(distinct)}
            index = array("I", [number[md] for md in texts]).tobytes()
        return (_unpickled, (array("q", self.ts).tobytes(), array("q", self.hashes).tobytes(),
                             "".join(lines), array("I", map(len, lines)).tobytes(), distinct,
                             index))

    def __len__(self) -> int:
        return len(self.ts)

    def ts_range(self) -> tuple[int, int]:
        """The oldest and newest timestamp, without making the rows (a pack holds them: the
        writer asks several times a stream, and min() and max() over a stream's timestamps
        were 14 % of the GIL it held, py-spy --gil)."""
        if self.pack is not None:
            return self.pack.min_ts, self.pack.max_ts
        return min(self.ts), max(self.ts)

    def without_repeats(self) -> bool:
        """No two rows share a timestamp and hash (what makes a repeat, as `entries`'s
        unique key)."""
        return len(set(zip(self.ts, self.hashes))) == len(self.ts)

    def lines(self) -> Sequence[str]:
        if self._lines is None and self._mds is None:
            self._lines, self._mds = _from_pack(self.pack)
        if self._lines is None:
            ends = list(accumulate(array("I", self._lengths)))
            text = self._text
            self._lines = [text[a:b] for a, b in zip([0, *ends], ends)]
        return self._lines

    def md_texts(self) -> Sequence[str | None]:
        if self._mds is None:
            self._lines, self._mds = _from_pack(self.pack)
        mds = self._mds
        return list(repeat(mds[0], len(self.ts))) if len(mds) != len(self.ts) else mds

    def rows(self) -> list[Row]:
        if self._rows is None:
            self._rows = list(zip(self.ts, self.hashes, self.lines(), self.md_texts()))
        return self._rows

    def __getitem__(self, i):
        return self.rows()[i]

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows())

    def __eq__(self, other: object) -> bool:
        return self.rows() == (other.rows() if isinstance(other, RowColumns) else other)


def _unpickled(ts: bytes, hashes: bytes, text: str, lengths: bytes, distinct: tuple,
               index: bytes) -> RowColumns:
    mds: Sequence = [distinct[k] for k in array("I", index)] if index else distinct
    if not index and not distinct:
        mds = (None,)
    return RowColumns(array("q", ts), array("q", hashes), None, mds, text, lengths)


def _unpickled_packed(ts: bytes, hashes: bytes, pack: PackParts) -> RowColumns:
    return RowColumns(array("q", ts), array("q", hashes), None, None, pack=pack)


def _from_pack(pack: PackParts | None) -> tuple[list[str], list[str | None]]:
    """The lines and metadata texts of a pack's rows, in the order they were given (the
    pack holds them sorted by time, with that order as deltas)."""
    assert pack is not None
    n = pack.rows
    lines = B.decode_lines(pack.lines, B.decode_lengths(pack.lengths),
                           bool(pack.flags & B.FLAG_ASCII))
    mds = B.decode_metadata(pack.metadata, n)
    if n < 2:
        return lines, mds
    order = list(accumulate(struct.unpack(f"<{n - 1}q", pack.order_deltas),
                            initial=pack.first_order))
    if order == list(range(n)):
        return lines, mds
    given_lines: list = [None] * n
    given_mds: list = [None] * n
    for j, i in enumerate(order):
        given_lines[i] = lines[j]
        given_mds[i] = mds[j]
    return given_lines, given_mds


def ts_range(rows: Sequence[Row]) -> tuple[int, int]:
    """The oldest and newest timestamp of rows, columns or a list."""
    if isinstance(rows, RowColumns):
        return rows.ts_range()
    return min(r[0] for r in rows), max(r[0] for r in rows)
