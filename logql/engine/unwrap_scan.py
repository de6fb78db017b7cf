"""A shortcut for the commonest unwrap query: `{...} [|= ...] | logfmt | unwrap name` grouped
by labels the stream already has, e.g. `quantile_over_time(0.99, {job="app"} | logfmt |
unwrap latency_ms [5m]) by (host)`.

The general path parses every pair of every line into a label builder (the parser keeps only
the labels the query reads, but still walks every pair) to find one value. Here one
possessive regular expression walks the plain pairs (ASCII keys, unquoted values) to the
first `name=` and takes a plain decimal value as the sample; the series key comes from the
stream and the entry's structured metadata alone, worked out once per (stream, metadata). A line the expression
does not take (a quote or an odd key before the pair, the pair missing, an empty or quoted
value, a value Go would not parse as a float) goes through the general path, so the answer
is the general path's on every line: tests/metrics/test_unwrap_scan.py checks that line by
line.
"""

from __future__ import annotations

import re
from itertools import compress
from typing import Callable

import numpy as np

from logql.pipeline.builder import ERROR, LabelsBuilder
from logql.pipeline.label_filters import StringLabelFilter, Unwrap
from logql.pipeline.line import LineFilter
from logql.pipeline.parsers import LogfmtParser
from logql.pipeline.stages import Pipeline
from logql.reading import LineColumns

# `value` of a line a leading line filter drops: the general path would drop it too
DROPPED = object()


def _first_pair(name: str) -> re.Pattern:
    """`name=<decimal>` as the first pair of that name, every pair before it plain (ASCII
    keys, unquoted values: no quote can hide the pair, no other key sanitises to the name).
    Possessive, so one pass without backtracking; a first pair with an empty or other value
    does not match (the general path reads such lines). The value is one Python's float()
    reads exactly as Go's ParseFloat: no exponent, underscores, inf or nan, too few digits
    to overflow."""
    n = re.escape(name)
    return re.compile(rf'(?:[\x00- ]*+(?!{n}=)[A-Za-z0-9_]++(?:=[^\x00- ="]*+)?+(?=[\x00- ]))*+'
                      rf'[\x00- ]*+{n}=(-?[0-9]{{1,300}}(?:\.[0-9]+)?)(?=[\x00- ]|\Z)')


def _first_pairs(name: str) -> re.Pattern:
    """_first_pair over a lines column with 0xFF before each line (unwrap_columns.py): one
    match per line, from its 0xFF, whose group is the value, or empty where _first_pair
    would not match. 0xFF, in no UTF-8 text, ends a line as the end of the text does, and
    is in no class a line's bytes may match; every byte of a non-ASCII character is a value
    byte, as the character is for the str expression. The lookahead after each pair of
    _first_pair is left out here: a key or value stops at a byte that is not a space, and
    neither another key nor the name can begin at such a byte, so the match fails there
    all the same."""
    n = re.escape(name).encode()
    return re.compile(rb'\xff(?:[\x00- ]*+(?:(?!' + n + rb'=)[A-Za-z0-9_]++'
                      rb'(?:=[^\x00- ="\xff]*+)?+[\x00- ]*+)*+' + n +
                      rb'=(-?[0-9]{1,300}(?:\.[0-9]+)?)(?=[\x00- \xff]|\Z)|)')


SEP = 0xFF


def separated(lc: LineColumns) -> tuple[np.ndarray, np.ndarray]:
    """The lines column with SEP before each line, and where each SEP is."""
    rows = lc.rows
    buf = np.empty(len(lc.lines) + rows, dtype=np.uint8)
    seps = lc.offsets[:-1] + np.arange(rows, dtype=np.int64)
    keep = np.ones(len(buf), dtype=bool)
    keep[seps] = False
    buf[seps] = SEP
    buf[keep] = np.frombuffer(lc.lines, dtype=np.uint8)
    return buf, seps


def _keeps_clean(stage) -> bool:
    """`| __error__=""`: every sample the shortcut makes passes it (it makes none with an
    error; a line that would have one goes the general way)."""
    return isinstance(stage, StringLabelFilter) and stage.name == ERROR \
        and stage.op == "=" and stage.value == ""


class LogfmtUnwrapScan:
    """For one plan: `value(line)` (None: take the general path) and `key_for(...)`."""

    __slots__ = ("name", "matchers", "others", "_match", "_error_key", "_findall")

    def __init__(self, name: str, matchers: tuple[Callable[[str], bool], ...],
                 others: frozenset[str]):
        self.name = name
        self.matchers = matchers
        # labels the query reads besides the unwrapped one; `__error__` (read by a
        # `| __error__=""`) no stream has, but a key of the line could set it: a line with
        # "error" in it, which every key that sanitises to it has, goes the general way
        self._error_key = "error" if ERROR in others else None
        self.others = others - {ERROR}
        self._match = _first_pair(name).match
        self._findall = _first_pairs(name).findall

    @classmethod
    def for_plan(cls, pipeline: Pipeline, unwrap: Unwrap | None,
                 only: frozenset[str] | None) -> "LogfmtUnwrapScan | None":
        """The shortcut, when the query has its shape; else None."""
        if unwrap is None or unwrap.conversion or only is None \
                or not all(_keeps_clean(f) for f in unwrap.post_filters):
            return None
        stages = pipeline.stages
        if not stages or not isinstance(stages[-1], LogfmtParser):
            return None
        parser = stages[-1]
        if parser.strict or parser.keep_empty or parser.extractions is not None \
                or parser.only != only or not all(isinstance(s, LineFilter)
                                                  for s in stages[:-1]):
            return None
        name = unwrap.label
        # a key with a leading digit sanitises to `_` + key: such a name is left alone
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
            return None
        return cls(name, tuple(s.match for s in stages[:-1]), only - {name})

    def key_for(self, stream: dict[str, str], sm, key_of) -> tuple | None:
        """The series key of every entry of this stream with this metadata whose value the
        shortcut reads, or None when a line could change it (a label the query reads that
        neither the stream nor the metadata holds would come from the line)."""
        lb = LabelsBuilder(stream).reset(sm)
        base = lb.base_has
        if base(self.name) or not all(base(n) for n in self.others):
            return None
        return key_of(lb)

    def value(self, line: str) -> float | object | None:
        """The sample value, DROPPED, or None: the general path decides."""
        for match in self.matchers:
            if not match(line):
                return DROPPED
        if self._error_key is not None and self._error_key in line:
            return None
        m = self._match(line)
        return float(m.group(1)) if m is not None else None

    def column_samples(self, lc: LineColumns) -> tuple[np.ndarray, np.ndarray]:
        """value() of every line of a LineColumns, for a plan without line filters
        (`matchers`): (taken, values) per line, taken False where the general path
        decides. One findall over the column gives one value's text per line."""
        assert not self.matchers
        rows = lc.rows
        buf, seps = separated(lc)
        found = self._findall(buf)
        if len(found) != rows:  # cannot happen (one match per 0xFF): the slow way
            found = [b"" if (v := self.value(lc.line(i))) is None else repr(v).encode()
                     for i in range(rows)]
        if self._error_key is not None:
            hits = [m.start() for m in re.finditer(self._error_key.encode(), buf)]
            for i in set(np.searchsorted(seps, hits, side="right").tolist()):
                found[i - 1] = b""
        if b"" not in found:  # the usual block: every line taken
            return (np.ones(rows, dtype=bool),
                    np.fromiter(map(float, found), dtype=np.float64, count=rows))
        taken = np.fromiter(map(bool, found), dtype=bool, count=rows)
        values = np.zeros(rows, dtype=np.float64)
        values[taken] = np.fromiter(map(float, compress(found, taken.tolist())),
                                    dtype=np.float64)
        return taken, values
