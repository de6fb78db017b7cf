"""What the engine reads stored logs through: the `Reader` protocol and the plan types it
hands down (line conditions, needles, count totals).

The engine declares here what it needs and imports nothing of storage/; an implementation
(storage/reader.py is the SQLite one) imports this module and nothing else of the engine.
docs/architecture.md gives each method's contract as a second implementation would need it.
Hiding deleted and expired lines is no implementation's business: services/read/visibility.py
wraps any `Reader` and takes them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterator, Mapping, Protocol, Sequence

import numpy as np

from logql.model import Matcher, Needle

Row = tuple  # (id, stream id, ts, line, metadata JSON text or None)
# (stream id, metadata text or "") -> (lines per bucket, bytes per bucket); grouped counts
# key (group number, "")
Totals = dict[tuple[Any, str], tuple[list[int], list[int]]]


class ScanCounts(Protocol):
    """Where a scan adds what it examined (the query's stats object)."""
    lines_scanned: int
    bytes_scanned: int


class Scan(Protocol):
    """One read of lines (`Reader.lines`)."""

    def batches(self) -> Iterator[list[Row]]: ...

    def finish(self) -> None: ...


@dataclass(frozen=True, eq=False)
class LineColumns:
    """Rows of one stream as columns (`Reader.line_columns`): what a sealed block holds, cut
    to the read's range, for evaluators that work on whole columns instead of row tuples.

    `ts` (int64, ascending; ties in entry id order) and `ids` (int64) per row; `lines` the
    rows' lines as UTF-8 bytes, concatenated, row i being `lines[offsets[i]:offsets[i + 1]]`
    (`offsets`: int64, rows + 1 of them, the first 0); `metadata` (int32) per row an index
    into `metadata_texts` (the distinct metadata JSON texts), -1 for none."""
    stream_id: int
    ts: np.ndarray
    ids: np.ndarray
    lines: bytes
    offsets: np.ndarray
    metadata: np.ndarray
    metadata_texts: Sequence[str]

    @property
    def rows(self) -> int:
        return len(self.ts)

    def line(self, i: int) -> str:
        return self.lines[self.offsets[i]:self.offsets[i + 1]].decode("utf-8", "surrogatepass")

    def metadata_text(self, i: int) -> str | None:
        k = int(self.metadata[i])
        return None if k < 0 else self.metadata_texts[k]


class Reader(Protocol):
    """Everything the engine asks of stored logs (contracts: docs/architecture.md)."""

    @property
    def count_granularity(self) -> int:
        """Nanoseconds: counts are cheapest on points that are multiples of this, and
        `grouped_counts` takes only such points."""
        ...

    def snapshot(self) -> ContextManager[Any]: ...

    def select_streams(self, tenant: Any, matchers: Sequence[Matcher], start: int,
                       end: int) -> Mapping[int, dict[str, str]]: ...

    def select_stream_groups(self, tenant: Any, matchers: Sequence[Matcher], start: int,
                             end: int, names: Sequence[str]
                             ) -> dict[int, tuple[str | None, ...]]: ...

    def lines(self, stream_ids: Sequence[int], start: int, end: int, *,
              conditions: LineConditions | None = None,
              needles: Sequence[Sequence[Needle]] = (), backward: bool = False,
              ordered: bool = True, limited: bool = False,
              counts: ScanCounts | None = None) -> Scan: ...

    def line_columns(self, stream_ids: Sequence[int], start: int, end: int
                     ) -> Iterator[LineColumns | list[Row]]:
        """Every row of the streams with start <= ts < end, once, in no promised order:
        in column batches where the rows are stored that way (sealed blocks), as row
        batches elsewhere (the head, or what a wrapper must filter row by row)."""
        ...

    def window_counts(self, stream_ids: Sequence[int], points: list[int],
                      want_bytes: bool) -> Totals: ...

    def grouped_counts(self, group_of: dict[int, int], points: list[int],
                       want_bytes: bool) -> Totals: ...

    def check_deadline(self) -> None: ...


def add_to_groups(totals: Totals, per_stream: Totals, group_of: dict[int, int],
                  nb: int) -> Totals:
    """Per-stream window counts (keys (stream, metadata)) added into `totals`, keyed (group,
    ""): grouped_counts for what cannot be summed per group in storage."""
    for (sid, _), (lines, sizes) in per_stream.items():
        acc = totals.setdefault((group_of[sid], ""), ([0] * nb, [0] * nb))
        for i in range(nb):
            acc[0][i] += lines[i]
            acc[1][i] += sizes[i]
    return totals


def utf8_len(line: str) -> int:
    """A line's size as every count gives it: its UTF-8 bytes."""
    return len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))


# -- what storage may test on the raw line -----------------------------------------------

# ASCII letters whose Unicode case-fold orbit holds a non-ASCII character (K: Kelvin sign,
# S: long s): folding ASCII only could miss a line that Go's (?i) would match
_FOLD_OUTSIDE_ASCII = frozenset("kKsS")
# longer case-insensitive needles are left to the pipeline: the SQLite reader tests them
# with LIKE, whose pattern SQLite bounds (SQLITE_MAX_LIKE_PATTERN_LENGTH, 50000)
MAX_CI_NEEDLE = 40000


def ci_testable(text: str) -> bool:
    """Whether a case-insensitive needle is tested: only when folding ASCII letters alone
    decides it exactly. Every implementation tests the same ones, or fewer."""
    return (0 < len(text) < MAX_CI_NEEDLE and text.isascii()
            and not any(c in _FOLD_OUTSIDE_ASCII for c in text))


@dataclass
class LineConditions:
    """Conditions on the stored line that every line kept by the query satisfies.

    `all_of`: an AND of ORs of needles `(text, case_insensitive)`; `none_of`: substrings no
    kept line contains. A case-insensitive needle that is not `ci_testable` makes its OR
    pass. `label_values`: `(name, value)` pairs a `| parser | name="value"` filter demands
    of streams without that label: the line holds the value, or a backslash that could hide
    it, or the entry's metadata has the label (see RequiredLabelValues)."""
    all_of: list[list[Needle]] = field(default_factory=list)
    none_of: list[str] = field(default_factory=list)
    label_values: list[tuple[str, str]] = field(default_factory=list)

    def matcher(self) -> "Callable[[str, str | None], bool] | None":
        """The conditions as a test of (line, metadata text); None when nothing applies.
        A reader may reject only lines this rejects (storage/scan.py renders the same
        tests as SQL)."""
        tests: list[Callable[[str, str | None], bool]] = []
        for clause in self.all_of:
            alts: list[tuple[str, bool]] = []
            for text, ci in clause:
                if ci and not ci_testable(text):
                    alts = []
                    break
                alts.append((text.lower() if ci else text, ci))
            if alts:
                tests.append(_any_of(alts))
        for text in self.none_of:
            tests.append(lambda line, md, t=text: t not in line)
        for name, value in self.label_values:
            key = f'"{name}":'
            tests.append(lambda line, md, v=value, k=key:
                         v in line or "\\" in line or (md is not None and k in md))
        if not tests:
            return None
        if len(tests) == 1:
            return tests[0]
        return lambda line, md: all(t(line, md) for t in tests)


def _any_of(alts: list[tuple[str, bool]]) -> "Callable[[str, str | None], bool]":
    if len(alts) == 1:
        text, ci = alts[0]
        if ci:
            return lambda line, md: text in _ascii_lower(line)
        return lambda line, md: text in line
    return lambda line, md: any(t in (_ascii_lower(line) if ci else line) for t, ci in alts)


def _ascii_lower(line: str) -> str:
    # str.lower() would fold more than ASCII letters (and İ to two characters)
    return line.lower() if line.isascii() else line.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
