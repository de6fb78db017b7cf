"""Index stats and log volume (spec/http-api.md section 6), counted from the per-minute
rollups through `window_counts`, never by reading lines. As Loki counts whole
chunks, the counts are of whole minutes: a range is widened to the minutes it touches (and
volume_range buckets that do not fall on minutes to the minute before). Retention and
pending delete requests apply as in every other read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from logql.model import MINUTE_NS
from logql.reading import Reader
from services.read.visibility import VisibleReader
from storage.reader import LogReader
from storage.streams import Matcher, TenantSet

MAX_SERIES_TEXT = "the query hit the max number of series limit (limit: {} series)"


class VolumeLimitError(ValueError):
    pass


@dataclass
class VolumeRequest:
    matchers: Sequence[Matcher]
    start: int
    end: int
    step: int                 # 0: one value over the whole range (index/volume)
    limit: int
    target_labels: list[str]
    aggregate_by: str         # series | labels


def _minute_floor(ns: int) -> int:
    return ns - ns % MINUTE_NS


def _minutes(bounds: list[int]) -> list[int]:
    """Bucket bounds moved onto whole minutes: the first and inner ones down, the last up."""
    out = [_minute_floor(b) for b in bounds[:-1]]
    out.append(-(-bounds[-1] // MINUTE_NS) * MINUTE_NS)
    return out


def _left_closed(points: list[int]) -> list[int]:
    """Points whose buckets (p[i], p[i+1]] are the buckets [points[i], points[i+1])."""
    return [p - 1 for p in points]


def index_stats(reader: VisibleReader[LogReader], tenant: str | TenantSet,
                matchers: Sequence[Matcher], start: int, end: int) -> dict[str, int]:
    with reader.snapshot():
        ids = reader.select_stream_ids(tenant, matchers, start, end)
        points = _minutes([start, end + 1])
        # each stream its own group: its totals summed over metadata by SQLite
        totals = reader.grouped_counts({sid: sid for sid in ids}, _left_closed(points),
                                       True) if ids else {}
        live = [sid for (sid, _), (lines, _) in totals.items() if lines[0] > 0]
        return {"streams": len(live), "chunks": reader.inner.segments(live, start, end),
                "bytes": sum(totals[(s, "")][1][0] for s in live),
                "entries": sum(totals[(s, "")][0][0] for s in live)}


def _bounds(req: VolumeRequest) -> list[int]:
    """Bucket boundaries: buckets are [b[i], b[i+1]), cut at multiples of `step`, the first
    starting at `start`, the last ending just after `end` (which it includes)."""
    if not req.step:
        return [req.start, req.end + 1]
    bounds = [req.start]
    edge = (req.start // req.step + 1) * req.step
    while edge <= req.end:
        bounds.append(edge)
        edge += req.step
    bounds.append(req.end + 1)
    return bounds


def volume(reader: Reader, tenant: str | TenantSet, req: VolumeRequest,
           max_series: int) -> tuple[str, list[dict[str, Any]]]:
    """(resultType, result) of index/volume (vector) or index/volume_range (matrix)."""
    names = list(dict.fromkeys(m.name for m in req.matchers))
    targets = [t for t in req.target_labels if t]
    required = [t for t in targets if t not in names]
    bounds = _bounds(req)
    points = _minutes(bounds)
    with reader.snapshot():
        streams = reader.select_streams(tenant, req.matchers, req.start, req.end)
        # streams that add to the same series (or, by labels, to the same names) form a
        # group that SQLite sums: a few rows per group, not one per stream and bucket
        group_keys: dict[tuple, int] = {}
        group_of: dict[int, int] = {}
        for sid, labels in streams.items():
            if not all(labels.get(t) for t in required):
                continue
            if req.aggregate_by == "labels":
                keys = tuple(((name, ""),) for name in (targets or labels) if name in labels)
            else:
                keys = (tuple((n, labels[n]) for n in sorted(targets or names) if n in labels),)
            group_of[sid] = group_keys.setdefault(keys, len(group_keys))
        totals = reader.grouped_counts(group_of, _left_closed(points),
                                       True) if group_of else {}
    nb = len(points) - 1
    keys_of = {grp: keys for keys, grp in group_keys.items()}
    series: dict[tuple, list[int]] = {}
    for (grp, _), (_, sizes) in totals.items():
        for key in keys_of[grp]:
            acc = series.setdefault(key, [0] * nb)
            for i in range(nb):
                acc[i] += sizes[i]
    series = {k: v for k, v in series.items() if any(v)}
    if len(series) > max_series:
        raise VolumeLimitError(MAX_SERIES_TEXT.format(max_series))
    ranked = sorted(series.items(), key=lambda kv: (-sum(kv[1]), kv[0]))[:req.limit]
    if not req.step:
        at = round(req.end / 1e9, 3)
        return "vector", [{"metric": dict(key), "value": [at, str(v[0])]}
                          for key, v in ranked]
    out = []
    for key, v in ranked:
        # each bucket is stamped a millisecond before it ends, as Loki stamps them (.999)
        values = [[round((bounds[i + 1] - 10**6) / 1e9, 3), str(v[i])]
                  for i in range(nb) if v[i]]
        out.append({"metric": dict(key), "values": values})
    return "matrix", out
