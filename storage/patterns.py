"""Mined patterns in SQLite (migrations/0007_patterns.sql, 0014_pattern_changes.sql), or in a
cluster's shared PostgreSQL: the miner's state per stream, its per-bucket counts, the
high-water mark of mined head entries, and a change counter for the nodes that do not mine."""

from __future__ import annotations

import json
import sqlite3
from typing import Iterable, Sequence

from storage.blocks import codec as B

# (stream_id, cluster_id, template, line, spans, gaps, level, pattern)
ClusterRow = tuple[int, int, list[str], str, list[list[int]], list[int], str, str]


def mined_id(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT mined_id FROM pattern_state WHERE id = 1").fetchone()
    return row[0] if row else 0


def new_entries(conn: sqlite3.Connection, after: int,
                limit: int) -> list[tuple[int, int, int, str, str | None]]:
    """(id, stream_id, ts, line, metadata) of head entries with id > after, in id order:
    about `limit` of them, and every one up to the newest returned (the miner's next mark).
    A push gives its `entries` rows and its packs ids from one sequence, each pack a run of
    its own (a delete request's rewrite keeps a subset of it), so packs in the order of their
    newest id hold their ids in that order too: the answer ends where the rows read or the
    packs read end, whichever is first. (A pack the sealer put back, the rest of a block cut
    at its limit, may hold ids of several runs, but only ids the miner had already passed:
    the sealer seals nothing above the miner's mark.)"""
    rows = conn.execute("SELECT id, stream_id, ts, line, metadata FROM entries "
                        "WHERE id > ? ORDER BY id LIMIT ?", (after, limit)).fetchall()
    upto = rows[-1][0] if len(rows) == limit else None
    packed = 0
    for sid, oldest, newest, *columns in conn.execute(
            "SELECT stream_id, min_id, max_id, rows, flags, keys, lengths, metadata, lines "
            "FROM blocks WHERE flags & 4 AND max_id > ? ORDER BY max_id", (after,)):
        if upto is not None and oldest > upto:
            break  # this pack's ids, and every later one's, lie past the rows read
        rows.extend((i, sid, ts, line, md) for i, ts, line, md in B.decode_rows(*columns)
                    if i > after)
        packed += columns[0]
        if packed >= limit:
            upto = newest if upto is None else min(upto, newest)
            break
    rows.sort()
    return rows if upto is None else [r for r in rows if r[0] <= upto]


# (change counter, clusters dropped since the look asked about (None: every template is
# given), the templates given)
Templates = tuple[int, list[tuple[int, int]] | None, list[ClusterRow]]
_CLUSTERS = ("SELECT stream_id, cluster_id, template, line, spans, gaps, level, pattern "
             "FROM pattern_clusters")


def templates(conn: sqlite3.Connection, seen: int | None = None) -> Templates:
    """The stored templates for a miner's copy, and the change counter they are at: every
    template, in id order per stream as the miner made them, or, after the counter of an
    earlier look (`seen`), only the templates written since and the clusters dropped since,
    while those are still listed (else every template again). The counter is read first, so
    that what is written meanwhile is given again at the next look rather than missed."""
    row = conn.execute("SELECT version, forgotten_upto FROM pattern_state "
                       "WHERE id = 1").fetchone()
    version, forgotten_upto = tuple(row) if row else (0, 0)
    if seen is None or seen < forgotten_upto:
        return version, None, _clusters(conn, _CLUSTERS + " ORDER BY stream_id, cluster_id")
    dropped = [tuple(r) for r in conn.execute(
        "SELECT stream_id, cluster_id FROM pattern_dropped WHERE version > ?", (seen,))]
    # unordered: SQLite would rather walk every template in key order than sort a few
    return version, dropped, _clusters(conn, _CLUSTERS + " WHERE version > ?", (seen,))


def _clusters(conn: sqlite3.Connection, sql: str, args: tuple = ()) -> list[ClusterRow]:
    return [(r[0], r[1], json.loads(r[2]), r[3], json.loads(r[4]), json.loads(r[5]), r[6],
             r[7]) for r in conn.execute(sql, args)]


def _next_version(conn: sqlite3.Connection) -> int:
    """The change counter, raised (writer): on PostgreSQL its row stays locked until the
    commit, so writes of templates commit in the order of their numbers, and a look that
    read a number has seen every write numbered below it."""
    return conn.execute(
        "INSERT INTO pattern_state (id, mined_id, version) VALUES (1, 0, 1) "
        "ON CONFLICT (id) DO UPDATE SET version = pattern_state.version + 1 "
        "RETURNING version").fetchone()[0]


def save(conn: sqlite3.Connection, changed: Iterable[ClusterRow],
         counts: dict[tuple[int, int, int], int], up_to_id: int) -> None:
    """One mining batch (writer): changed clusters, added counts, the new high-water mark."""
    version = _next_version(conn)
    conn.executemany(
        "INSERT INTO pattern_clusters (stream_id, cluster_id, template, line, spans, gaps, "
        "level, pattern, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (stream_id, cluster_id) "
        "DO UPDATE SET template = excluded.template, gaps = excluded.gaps, "
        "pattern = excluded.pattern, version = excluded.version",
        [(s, c, json.dumps(t), line, json.dumps(sp), json.dumps(g), lv, p, version)
         for s, c, t, line, sp, g, lv, p in changed])
    conn.executemany(
        "INSERT INTO pattern_samples (stream_id, cluster_id, bucket, count) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (stream_id, cluster_id, bucket) "
        "DO UPDATE SET count = pattern_samples.count + excluded.count",
        [(s, c, b, n) for (s, c, b), n in counts.items()])
    conn.execute("UPDATE pattern_state SET mined_id = ? WHERE id = 1", (up_to_id,))


def samples(conn: sqlite3.Connection, stream_ids: Sequence[int], start_s: int, end_s: int,
            step_s: int) -> list[tuple[str, str, int, int]]:
    """(pattern, level, step bucket, count) of the streams' samples with start <= bucket
    <= end, summed per pattern text and `step_s` bucket in SQLite."""
    return list(conn.execute(
        "SELECT c.pattern, min(c.level), s.bucket / ?3 * ?3 AS at, sum(s.count) "
        "FROM pattern_samples s JOIN pattern_clusters c "
        "ON c.stream_id = s.stream_id AND c.cluster_id = s.cluster_id "
        "WHERE s.stream_id IN (SELECT value FROM json_each(?4)) AND s.bucket >= ?1 "
        "AND s.bucket <= ?2 GROUP BY c.pattern, at",
        (start_s, end_s, step_s, json.dumps(list(stream_ids)))))


def forget_older(conn: sqlite3.Connection, keep_s: int) -> list[tuple[int, int]]:
    """Drop samples more than `keep_s` older than the newest one, and the clusters left
    without any (writer); returns those clusters (stream id, cluster id), for the miners to
    forget, and lists them for the nodes that do not mine (`templates`). Relative to the
    newest, so that logs pushed at old timestamps (a backfill, a test) are not dropped as soon
    as they are mined."""
    newest = conn.execute("SELECT max(bucket) FROM pattern_samples").fetchone()[0]
    if newest is None:
        return []
    conn.execute("DELETE FROM pattern_samples WHERE bucket < ?", (newest - keep_s,))
    dropped = [tuple(r) for r in conn.execute(
        "DELETE FROM pattern_clusters WHERE NOT EXISTS (SELECT 1 FROM pattern_samples s "
        "WHERE s.stream_id = pattern_clusters.stream_id "
        "AND s.cluster_id = pattern_clusters.cluster_id) "
        "RETURNING stream_id, cluster_id").fetchall()]
    if dropped:
        _list_dropped(conn, dropped)
    return dropped


def _list_dropped(conn: sqlite3.Connection, dropped: list[tuple[int, int]]) -> None:
    """List a round's dropped clusters under a new change counter, keeping the last round's
    too (a follower looks every minute, a round comes every 10: one that just took the
    lease over comes at once), and record up to where the older ones went."""
    last_round = conn.execute("SELECT max(version) FROM pattern_dropped").fetchone()[0]
    if last_round is not None:
        conn.execute("DELETE FROM pattern_dropped WHERE version < ?", (last_round,))
        conn.execute("UPDATE pattern_state SET forgotten_upto = ? WHERE id = 1",
                     (last_round - 1,))
    version = _next_version(conn)
    conn.executemany("INSERT INTO pattern_dropped (version, stream_id, cluster_id) "
                     "VALUES (?, ?, ?)", [(version, sid, cid) for sid, cid in dropped])


def uncount(conn: sqlite3.Connection, counts: dict[tuple[int, str, int], int]) -> None:
    """Take removed lines out of the counts (writer): `counts` is keyed by (stream, pattern
    text, bucket), since two templates of a stream may print the same; the lines come off
    the first of them (by cluster id) that has any, then the next. A statement per key, not
    per line, and the samples left at zero deleted by their own key: a broad delete request
    took a statement per removed line, and a look through every stream's samples per piece
    (issue 22)."""
    updates: list[tuple[int, int, int, int]] = []
    emptied: list[tuple[int, int, int]] = []
    for (sid, pattern, bucket), n in counts.items():
        for cluster_id, have in conn.execute(
                "SELECT s.cluster_id, s.count FROM pattern_clusters c JOIN pattern_samples s "
                "ON s.stream_id = c.stream_id AND s.cluster_id = c.cluster_id "
                "WHERE c.stream_id = ? AND c.pattern = ? AND s.bucket = ? AND s.count > 0 "
                "ORDER BY s.cluster_id", (sid, pattern, bucket)).fetchall():
            if n <= 0:
                break
            take = min(n, have)
            n -= take
            if take == have:
                emptied.append((sid, cluster_id, bucket))
            else:
                updates.append((take, sid, cluster_id, bucket))
    conn.executemany("UPDATE pattern_samples SET count = count - ? "
                     "WHERE stream_id = ? AND cluster_id = ? AND bucket = ?", updates)
    conn.executemany("DELETE FROM pattern_samples "
                     "WHERE stream_id = ? AND cluster_id = ? AND bucket = ?", emptied)
