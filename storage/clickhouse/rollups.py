"""Counts from the per-minute rollups (`rollups`, filled from `entries` by a materialized
view: storage/clickhouse/migrations/0002_rollups.sql), with exact corrections from the
entries at the edges that do not fall on a minute.

The decision is the SQLite reader's (storage/reader.py, `window_counts`): a bucket
(p[i], p[i+1]] is [e[i], e[i+1]) with e = p + 1; the whole minutes between the floors of
its ends come from the rollups, and the lines between an end's floor and the end itself
(the part of a minute the bucket does not own) move from one bucket to the one before.
Volume's buckets end on minutes and need no line; an evenly spaced grid on minutes needs
the lines exactly at its points; other edges are read as ranges while they are few and
cover at most half the span, as SQLite reads partial minutes. Past that, `plan` answers
None and the caller counts the entries.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from logql.model import MINUTE_NS
from logql.reading import Totals

# partial-minute edges read as one statement of ranges, up to this many (an instant query
# has two; a range query whose points miss the minutes has one per step, and is counted
# from the entries)
EDGE_RANGES_MAX = 16
HOUR_NS = 3600 * 10**9

Where = Callable[[str | None, list[int]], tuple[str, dict[str, Any]]]


class Plan:
    """Where a set of points' counts come from: rollup buckets between the minute floors
    `floors` of the bucket ends, and the edges (j, floor, end) whose lines move from
    bucket j to bucket j - 1."""

    def __init__(self, points: list[int]):
        ends = [p + 1 for p in points]
        self.floors = [e - e % MINUTE_NS for e in ends]
        self.edges = [(j, f, e) for j, (f, e) in enumerate(zip(self.floors, ends)) if e > f]
        self.nb = len(points) - 1
        self.partial = sum(e - f for _, f, e in self.edges)
        self.points_only = all(e - f == 1 for _, f, e in self.edges)


def plan(points: list[int]) -> Plan | None:
    """How the rollups answer buckets (p[i], p[i+1]]; None: from the entries alone."""
    p = Plan(points)
    if p.partial * 2 > points[-1] - points[0]:
        return None
    if not p.points_only and len(p.edges) > EDGE_RANGES_MAX:
        return None
    return p


def totals(client: Any, db: str, where: Where,
           by_tenant: dict[str | None, list[int]], p: Plan,
           group_of: dict[int, int] | None) -> Totals:
    """Lines and bytes per bucket keyed (stream, metadata), or with `group_of` (stream id ->
    group number) keyed (group, "") and summed by ClickHouse. `client`: the reader's, with
    `query` (rows) and `query_arrow` (columns)."""
    out: Totals = {}
    nb = p.nb

    def add(key: Any, md: str, i: int, n: int, b: int) -> None:
        t = out.get((key, md))
        if t is None:
            t = out[(key, md)] = ([0] * nb, [0] * nb)
        t[0][i] += n
        t[1][i] += b

    for tenant, ids in by_tenant.items():
        clause, params = where(tenant, ids)
        if group_of is None:
            key, kparams = "stream_id, metadata", {}
        else:
            # the group of each stream, looked up by ClickHouse: a few rows per group come
            # back instead of one per stream, metadata and bucket
            key = "transform(stream_id, {gs:Array(UInt64)}, {gv:Array(UInt64)}, " \
                  "toUInt64(0)), ''"
            kparams = {"gs": ids, "gv": [group_of[s] for s in ids]}
        params = {**params, **kparams}
        rows, index = _minutes(client.query_arrow, db, clause, params, key, p)
        for k, md, i, n, b in rows:
            add(k, md, i if index is None else index[i], n, b)
        for k, md, j, n, b in _edges(client.query, db, clause, params, key, p):
            if j > 0:
                add(k, md, j - 1, n, b)
            if j < nb:
                add(k, md, j, -n, -b)
    return out


def _minutes(query_arrow: Callable[..., Any], db: str, clause: str,
             params: dict[str, Any], key: str, p: Plan
             ) -> tuple[Iterable[tuple], dict[int, int] | None]:
    """(key, metadata, bucket, lines, bytes) rows of the whole minutes [floors[i],
    floors[i+1]), and the bucket of each bucket value when it is not the bucket itself."""
    f = p.floors
    if f[0] >= f[-1]:
        return [], None
    width = f[1] - f[0]
    if width > 0 and all(b - a == width for a, b in zip(f, f[1:])):
        bucket, extra, index = "intDiv(minute - {f0:Int64}, {w:Int64})", {"w": width}, None
    else:
        # the bucket of a minute is the last floor at or below it (floors repeat when two
        # points share a minute; only the last of them starts a bucket with minutes in it)
        bucket, extra = "roundDown(minute, {fs:Array(Int64)})", {"fs": f[:-1]}
        index = {x: i for i, x in enumerate(f[:-1])}
    # a row per series and bucket (1,440 a series for a day at step 1m): as columns, which
    # came back in a third of the time JSON rows took
    table = query_arrow(
        f"SELECT {key}, {bucket} AS i, sum(lines), sum(bytes) FROM {db}.rollups "
        f"WHERE {clause} AND minute >= {{f0:Int64}} AND minute < {{fn:Int64}} "
        "GROUP BY 1, 2, i", {**params, **extra, "f0": f[0], "fn": f[-1]})
    return zip(*(_values(column) for column in table.columns)), index


def _values(column: Any) -> list[Any]:
    """A column's Python values; String as str, whether it came as Arrow text or binary (a
    server sends binary unless told otherwise)."""
    import pyarrow as pa
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        column = column.cast(pa.large_string())
    return column.to_pylist()


def _edges(query: Callable[..., list[list[Any]]], db: str, clause: str,
           params: dict[str, Any], key: str, p: Plan) -> list[tuple]:
    """(key, metadata, edge j, lines, bytes) of the entries in each edge [floor, end)."""
    if not p.edges:
        return []
    if p.points_only:
        # single timestamps: found through the ordering key, named by the timestamp
        at = {f: j for j, f, _ in p.edges}
        rows = query(f"SELECT {key}, ts, count(), sum(bytes) FROM {db}.entries "
                     f"WHERE {clause} AND ts IN {{at:Array(Int64)}} GROUP BY 1, 2, ts",
                     {**params, "at": sorted(at)})
        return [(k, md, at[ts], n, b) for k, md, ts, n, b in rows]
    # a few ranges, which may overlap (two points in one minute): a line counts in each
    spans = " OR ".join(f"(ts >= {{a{n}:Int64}} AND ts < {{b{n}:Int64}})"
                        for n in range(len(p.edges)))
    bounds = {f"{c}{n}": v for n, (_, lo, hi) in enumerate(p.edges)
              for c, v in (("a", lo), ("b", hi))}
    return [tuple(r) for r in query(
        f"SELECT {key}, arrayJoin(arrayFilter((j, a, b) -> ts >= a AND ts < b, "
        "{ej:Array(UInt32)}, {ea:Array(Int64)}, {eb:Array(Int64)})) AS j, count(), "
        f"sum(bytes) FROM {db}.entries WHERE {clause} AND ({spans}) GROUP BY 1, 2, j",
        {**params, **bounds, "ej": [j for j, _, _ in p.edges],
         "ea": [lo for _, lo, _ in p.edges], "eb": [hi for _, _, hi in p.edges]})]


def hours_sql(db: str, clause: str, start: int, end: int) -> tuple[str, dict[str, Any]]:
    """(statement, parameters) counting each stream's hours with data in [start, end]
    (index/stats' chunks): the whole minutes from the rollups (a minute whose lines were all
    deleted sums to 0 and counts for nothing), the partial ones at both ends from the
    entries. Minutes before 1970 are left to the entries, whose hour (intDiv) rounds
    towards 0 there."""
    a = max(-(-start // MINUTE_NS) * MINUTE_NS, 0)
    b = (end + 1) - (end + 1) % MINUTE_NS
    bounds = {"s": start, "e": end, "a": a, "b": b}
    if a >= b:
        return (f"SELECT uniqExact(stream_id, intDiv(ts, {HOUR_NS})) FROM {db}.entries "
                f"WHERE {clause} AND ts >= {{s:Int64}} AND ts <= {{e:Int64}}", bounds)
    minutes = (f"SELECT stream_id, intDiv(minute, {HOUR_NS}) AS h FROM {db}.rollups "
               f"WHERE {clause} AND minute >= {{a:Int64}} AND minute < {{b:Int64}} "
               "GROUP BY stream_id, minute HAVING sum(lines) > 0")
    if start == a and end + 1 == b:  # whole minutes only (what index/stats asks on minutes)
        return f"SELECT uniqExact(stream_id, h) FROM ({minutes})", bounds
    return (f"SELECT uniqExact(stream_id, h) FROM ({minutes} "
            f"UNION ALL SELECT stream_id, intDiv(ts, {HOUR_NS}) AS h FROM {db}.entries "
            f"WHERE {clause} AND ((ts >= {{s:Int64}} AND ts < {{a:Int64}}) "
            "OR (ts >= {b:Int64} AND ts <= {e:Int64})))", bounds)


__all__ = ["plan", "totals", "hours_sql", "Plan"]
