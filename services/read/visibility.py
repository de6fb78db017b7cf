"""Hiding what retention and delete requests hide, over any `logql.reading.Reader`.

Lines older than their stream's retention cutoff, and lines a pending delete request names,
stay on disk until the compactor removes them (services/upkeep/compactor.py, services/upkeep/deletes.py);
until then every read must behave as if they were gone. `VisibleReader` does that for any
implementation, through the protocol alone, so a second backend implements reading only:

* `select_streams` asks, per stream found, for its cutoff and its delete requests;
* `lines` starts no earlier than the streams' cutoffs and drops the rows they hide;
* `window_counts` empties the buckets wholly before a cutoff, takes the lines before it out
  of the bucket it cuts (counted by the inner reader), and subtracts each line a delete
  request picks: those lines must be read, as only a line's text says whether a request's
  line filter picks it (the counts stay exact; only the deleted ranges cost a read);
* `grouped_counts` passes through for the streams neither affects; the affected ones' window
  counts, corrected as above, are added to their groups.
"""

from __future__ import annotations

from bisect import bisect_left
from contextlib import contextmanager
from typing import Any, Callable, Generic, Iterator, Mapping, Sequence, TypeVar

from logql.model import Matcher
from logql.reading import LineColumns, Reader, Row, Scan, Totals, add_to_groups, utf8_len

R = TypeVar("R", bound=Reader)
# (start, end, line predicate) of one delete request, both ends inclusive
Deletion = tuple[int, int, Callable[[str], bool]]


class VisibleReader(Generic[R]):
    """`inner` as the engine may see it. `cutoff_of(tenant, labels)`: the oldest visible
    timestamp of a stream, or None; `deletes_of(tenant, labels)`: its delete requests."""

    def __init__(self, inner: R,
                 cutoff_of: Callable[[str, dict[str, str]], int | None] | None = None,
                 deletes_of: Callable[[str, dict[str, str]], list[Deletion]] | None = None):
        self.inner = inner
        self.cutoff_of = cutoff_of
        self.deletes_of = deletes_of
        # no retention and no delete request: nothing to ask of any stream, whose label
        # sets then need not be read
        self.passes_through = cutoff_of is None and deletes_of is None
        # per stream id, as select_streams found them
        self.cutoffs: dict[int, int] = {}
        self.deletes: dict[int, list[Deletion]] = {}

    @property
    def count_granularity(self) -> int:
        return self.inner.count_granularity

    @contextmanager
    def snapshot(self) -> Iterator["VisibleReader[R]"]:
        with self.inner.snapshot():
            yield self

    def check_deadline(self) -> None:
        self.inner.check_deadline()

    # -- streams ---------------------------------------------------------------------------
    def select_streams(self, tenant: Any, matchers: Sequence[Matcher], start: int,
                       end: int) -> Mapping[int, dict[str, str]]:
        out = self.inner.select_streams(tenant, matchers, start, end)
        if self.passes_through:
            return out
        for sid, labels in out.items():
            own = tenant if isinstance(tenant, str) else labels.get("__tenant_id__", "")
            if self.cutoff_of is not None:
                cutoff = self.cutoff_of(own, labels)
                if cutoff is not None:
                    self.cutoffs[sid] = cutoff
            if self.deletes_of is not None:
                found = self.deletes_of(own, labels)
                if found:
                    self.deletes[sid] = found
        return out

    def select_stream_ids(self, tenant: Any, matchers: Sequence[Matcher], start: int,
                          end: int) -> list[int]:
        """The ids of select_streams; with no retention or delete request to ask about, the
        streams' label sets are never read."""
        if self.passes_through:
            return self.inner.select_stream_ids(tenant, matchers, start, end)
        return list(self.select_streams(tenant, matchers, start, end))

    def select_stream_groups(self, tenant: Any, matchers: Sequence[Matcher], start: int,
                             end: int, names: Sequence[str]) -> dict[int, tuple[str | None, ...]]:
        """As select_streams with only the values of `names`; the whole label sets are read
        only when a retention cutoff or a delete request may need them."""
        if self.passes_through:
            return self.inner.select_stream_groups(tenant, matchers, start, end, names)
        return {sid: tuple([labels.get(n) for n in names]) for sid, labels in
                self.select_streams(tenant, matchers, start, end).items()}

    def visible_streams(self, tenant: Any, groups: Sequence[Sequence[Matcher]], start: int,
                        end: int) -> dict[int, dict[str, str]]:
        """As select_streams for the union of matcher groups, without the streams that have
        no line left in [start, end] (what labels and series answer)."""
        found: dict[int, dict[str, str]] = {}
        for group in groups or [()]:
            found.update(self.select_streams(tenant, group, start, end))
        for sid in list(found):
            hides = self.cutoffs.get(sid, start) > start or any(
                a <= end and b >= start for a, b, _ in self.deletes.get(sid, ()))
            # the first visible row settles it; an unordered, limited scan reads the least
            if hides and not any(self.lines([sid], start, end + 1, ordered=False,
                                            limited=True).batches()):
                del found[sid]
        return dict(sorted(found.items()))

    # -- lines -----------------------------------------------------------------------------
    def lines(self, stream_ids: Sequence[int], start: int, end: int, **kw: Any) -> Scan:
        ids = list(stream_ids)
        cut = [self.cutoffs[i] for i in ids if i in self.cutoffs]
        if cut and len(cut) == len(ids):
            start = max(start, min(cut))  # no stream has a visible line before
        inner = self.inner.lines(ids, start, end, **kw)
        cutoffs = {i: self.cutoffs[i] for i in ids if i in self.cutoffs}
        deleted = {i: self.deletes[i] for i in ids if i in self.deletes}
        if not cutoffs and not deleted:
            return inner
        return _VisibleScan(inner, cutoffs, deleted)

    def line_columns(self, stream_ids: Sequence[int], start: int,
                     end: int) -> Iterator[LineColumns | list[Row]]:
        """As the inner reader's, without what cutoffs and delete requests hide: a stream
        with a cutoff is read from it on (column batches still), a stream a delete request
        names only as rows, filtered as `lines` filters them (no column batch of it ever
        reaches the engine, so no column path can skip the filter)."""
        ids = list(stream_ids)
        deleted = [i for i in ids if i in self.deletes]
        by_start: dict[int, list[int]] = {}
        for i in ids:
            if i not in self.deletes:
                by_start.setdefault(max(start, self.cutoffs.get(i, start)), []).append(i)
        for lo, group in by_start.items():
            if lo < end:
                yield from self.inner.line_columns(group, lo, end)
        if deleted:
            yield from self.lines(deleted, start, end, ordered=False).batches()

    def hidden_lines(self, stream_ids: Sequence[int], start: int,
                     end: int) -> Iterator[tuple[int, int, str]]:
        """(stream, ts, line) of the lines in [start, end] that pending delete requests or
        retention hide (what counts kept elsewhere, the patterns', must take out: expired
        lines stay in their counts until the compactor's sweep removes them)."""
        for sid in stream_ids:
            found = self.deletes.get(sid) or []
            cut = self.cutoffs.get(sid)
            spans = [(a, b) for a, b, _ in found]
            if cut is not None and cut > start:
                spans.append((start, cut - 1))  # older than the stream's retention cutoff
            if not spans:
                continue
            lo, hi = max(start, min(a for a, _ in spans)), min(end, max(b for _, b in spans))
            if lo > hi:
                continue
            for _, _, ts, line, _ in self._stored(sid, lo, hi):
                if (cut is not None and ts < cut) or _picked(found, ts, line):
                    yield sid, ts, line

    # -- counts ----------------------------------------------------------------------------
    def window_counts(self, stream_ids: Sequence[int], points: list[int],
                      want_bytes: bool) -> Totals:
        totals = self.inner.window_counts(stream_ids, points, want_bytes)
        if len(points) < 2 or not stream_ids:
            return totals
        if self.cutoffs:
            self._hide_expired(totals, points, want_bytes)
        if self.deletes:
            self._hide_deleted(totals, stream_ids, points)
        return totals

    def grouped_counts(self, group_of: dict[int, int], points: list[int],
                       want_bytes: bool) -> Totals:
        affected = [sid for sid in group_of if sid in self.cutoffs or sid in self.deletes]
        if not affected:
            return self.inner.grouped_counts(group_of, points, want_bytes)
        # the streams retention or deletes touch per stream (what they hide is taken out
        # there), added to the others' group sums
        rest = {sid: grp for sid, grp in group_of.items()
                if sid not in self.cutoffs and sid not in self.deletes}
        totals = self.inner.grouped_counts(rest, points, want_bytes) if rest else {}
        return add_to_groups(totals, self.window_counts(affected, points, want_bytes),
                             group_of, len(points) - 1)

    def _hide_expired(self, totals: Totals, points: list[int], want_bytes: bool) -> None:
        """Buckets wholly before a stream's cutoff are emptied; the one it cuts loses the
        lines before it, as the inner reader counts them."""
        nb = len(points) - 1
        cut_buckets: dict[int, int] = {}
        for (sid, md), (lines, sizes) in totals.items():
            cutoff = self.cutoffs.get(sid)
            if cutoff is None or cutoff <= points[0] + 1:
                continue
            for i in range(nb):
                if points[i + 1] < cutoff:
                    lines[i] = sizes[i] = 0
                elif points[i] < cutoff - 1:
                    cut_buckets[sid] = i
        for sid, i in cut_buckets.items():
            edge = self.inner.window_counts([sid], [points[i], self.cutoffs[sid] - 1],
                                            want_bytes)
            for (_, md), (n, b) in edge.items():
                t = totals.get((sid, md))
                if t is not None:
                    t[0][i] -= n[0]
                    if want_bytes:  # without them, the cut bucket's bytes are left as read
                        t[1][i] -= b[0]

    def _hide_deleted(self, totals: Totals, stream_ids: Sequence[int],
                      points: list[int]) -> None:
        """The streams' lines in the requests' ranges are read, and each one a request
        picks is subtracted from its bucket."""
        for sid in stream_ids:
            found = self.deletes.get(sid)
            if not found:
                continue
            lo = max(points[0] + 1, min(f[0] for f in found), self.cutoffs.get(sid, 0))
            hi = min(points[-1], max(f[1] for f in found))
            if lo > hi:
                continue
            for _, _, ts, line, md in self._stored(sid, lo, hi):
                if not _picked(found, ts, line):
                    continue
                t = totals.get((sid, md or ""))
                if t is not None:
                    i = bisect_left(points, ts) - 1
                    t[0][i] -= 1
                    t[1][i] -= utf8_len(line)

    def _stored(self, sid: int, lo: int, hi: int) -> Iterator[Row]:
        """Every stored row of one stream with lo <= ts <= hi, hidden or not."""
        for rows in self.inner.lines([sid], lo, hi + 1, ordered=False).batches():
            yield from rows


def _picked(found: list[Deletion], ts: int, line: str) -> bool:
    return any(a <= ts <= b and pick(line) for a, b, pick in found)


class _VisibleScan:
    """A scan without the rows its streams' cutoffs and delete requests hide."""

    def __init__(self, inner: Scan, cutoffs: dict[int, int], deleted: dict[int, list]):
        self.inner, self.cutoffs, self.deleted = inner, cutoffs, deleted

    def batches(self) -> Iterator[list[Row]]:
        cutoffs, deleted = self.cutoffs, self.deleted
        for rows in self.inner.batches():
            kept = [r for r in rows if r[2] >= cutoffs.get(r[1], r[2])
                    and not any(a <= r[2] <= b and pick(r[3])
                                for a, b, pick in deleted.get(r[1], ()))]
            if kept:
                yield kept

    def finish(self) -> None:
        self.inner.finish()
