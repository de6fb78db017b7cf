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
"""

from __future__ import annotations

from array import array
from itertools import accumulate, repeat
from typing import Iterator, Sequence

Row = tuple[int, int, str, "str | None"]


class RowColumns(Sequence):
    """Rows `(ts, hash, line, metadata text or None)` in their order, as columns."""

    __slots__ = ("ts", "hashes", "_lines", "_text", "_lengths", "_mds", "_rows")

    def __init__(self, ts: Sequence[int], hashes: Sequence[int], lines: Sequence[str] | None,
                 mds: Sequence[str | None], text: str = "", lengths: bytes = b"") -> None:
        self.ts, self.hashes = ts, hashes
        self._lines, self._mds = lines, mds  # lines None: `text` cut at `lengths`
        self._text, self._lengths = text, lengths
        self._rows: list[Row] | None = None

    @classmethod
    def of(cls, rows: Sequence[Row]) -> "RowColumns":
        return cls([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                   [r[3] for r in rows])

    def __reduce__(self):
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
        """The oldest and newest timestamp, without making the rows."""
        return min(self.ts), max(self.ts)

    def without_repeats(self) -> bool:
        """No two rows share a timestamp and hash (what makes a repeat, as `entries`'s
        unique key)."""
        return len(set(zip(self.ts, self.hashes))) == len(self.ts)

    def lines(self) -> Sequence[str]:
        if self._lines is None:
            ends = list(accumulate(array("I", self._lengths)))
            text = self._text
            self._lines = [text[a:b] for a, b in zip([0, *ends], ends)]
        return self._lines

    def md_texts(self) -> Sequence[str | None]:
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


def ts_range(rows: Sequence[Row]) -> tuple[int, int]:
    """The oldest and newest timestamp of rows, columns or a list."""
    if isinstance(rows, RowColumns):
        return rows.ts_range()
    return min(r[0] for r in rows), max(r[0] for r in rows)
