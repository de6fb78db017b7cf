"""Removing lines from ClickHouse: what the compactor does on SQLite's head and blocks
(services/upkeep/compactor.py, services/upkeep/deletes.py), as lightweight DELETEs.

A delete request's lines are picked in Python (its LogQL filter is logstore's own
pipeline) and removed by `seq`, DELETE_BATCH of them to a statement whatever their streams;
retention removes everything older than the cutoff of the
streams that share it (a tenant's streams under one retention period), up to EXPIRE_STREAMS
streams to a statement: each DELETE is a mutation ClickHouse applies to every part it
touches, and a statement per stream made a sweep over 5,000 pods 10,000 mutations (the
DELETE, and the streams row replaced). A stream left with no line goes with its postings,
as on SQLite, the emptied streams of a tenant together.

Every DELETE of entries is followed by the negative totals of the lines it removed, per
minute and metadata, inserted into the rollups (their SummingMergeTree adds them up), so
that counts from the rollups stay those of the entries. The totals are read before the
DELETE under the same condition. ClickHouse has no transaction over both: a process that
dies between the DELETE and the insert leaves those minutes counting the removed lines.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable

from logql.model import MINUTE_NS, parse_canonical
from storage.batches import bounded_batches
from storage.clickhouse import cluster, ttl
from storage.retention import StreamInfo

# seqs per DELETE statement
DELETE_BATCH = 5000
# streams per retention DELETE, and per query of a delete request's lines: their ids travel
# as a parameter, in the URL of a server's HTTP request (about 7 KB)
EXPIRE_STREAMS = 1000
# a delete request's lines read in one query (whole streams)
READ_ROWS = 200_000


class ClickHouseRemoval:
    def __init__(self, client: Any, db: str, forget: Callable[[int], None],
                 cluster_name: str = ""):
        # `forget(stream id)`: the writer's knowledge of a stream that was dropped
        self.client, self.db, self.forget = client, db, forget
        # a DELETE names the local tables ON CLUSTER on a cluster (storage.clickhouse.cluster)
        self.cluster = cluster_name

    def _table(self, name: str) -> str:
        return cluster.changing(self.db, name, self.cluster)

    def streams(self) -> dict[int, StreamInfo]:
        return {sid: StreamInfo(tenant, parse_canonical(text), first, last,
                                frozenset(rules) if rules else frozenset((0,)))
                for sid, tenant, text, first, last, rules in self.client.query(
                    f"SELECT id, any(tenant), any(labels), min(first_ts), max(last_ts), "
                    f"groupUniqArrayArray(rules) FROM {self.db}.streams GROUP BY id")}

    def remove(self, tenant: str, sids: list[int], start: int, end: int,
               pick: Callable[[str], bool]) -> dict[int, list[tuple[int, str, int]]]:
        """Delete the lines with start <= ts <= end that `pick` takes of the tenant's streams
        `sids` (as streams() gave them); (ts, line, UTF-8 bytes) of each, by stream. The
        lines are read many whole streams to a query, up to READ_ROWS lines and
        EXPIRE_STREAMS streams (a stream with more lines is read alone: a month of one
        stream is as much as a read holds), streams without a line in the range not at all;
        they are deleted DELETE_BATCH to a statement, whatever their streams. A query per
        stream made a delete over 100,000 streams 100,000 round trips (issue 22)."""
        out: dict[int, list[tuple[int, str, int]]] = {}
        picked: list[tuple[int, int]] = []  # (stream id, seq) not deleted yet
        where = ("tenant = {t:String} AND stream_id IN {sids:Array(UInt64)} "
                 "AND ts >= {s:Int64} AND ts <= {e:Int64}")
        params = {"t": tenant, "s": start, "e": end}
        held: list[tuple[int, int]] = []  # (stream id, lines in the range)
        for i in range(0, len(sids), EXPIRE_STREAMS):
            held += self.client.query(
                f"SELECT stream_id, count() FROM {self.db}.entries WHERE {where} "
                "GROUP BY stream_id ORDER BY stream_id",
                {**params, "sids": sids[i:i + EXPIRE_STREAMS]})
        for part in _read_batches(held):
            for sid, seq, ts, line, size in self.client.query(
                    f"SELECT stream_id, seq, ts, line, bytes FROM {self.db}.entries "
                    f"WHERE {where} ORDER BY stream_id, ts, seq", {**params, "sids": part}):
                if pick(line):
                    out.setdefault(sid, []).append((ts, line, size))
                    picked.append((sid, seq))
            done = 0
            while len(picked) - done >= DELETE_BATCH:
                self._delete_picked(tenant, picked[done:done + DELETE_BATCH])
                done += DELETE_BATCH
            picked = picked[done:]
        if picked:
            self._delete_picked(tenant, picked)
        return out

    def _delete_picked(self, tenant: str, picked: list[tuple[int, int]]) -> None:
        """Delete the lines of (stream id, seq) pairs."""
        self._delete(tenant, sorted({sid for sid, _ in picked}), "seq IN {seqs:Array(UInt64)}",
                     {"seqs": [seq for _, seq in picked]})

    def set_ttl(self, plan: ttl.TtlPlan) -> bool:
        """Give the entries and rollups tables the TTL of `plan` (storage/clickhouse/ttl.py)
        unless they carry it; whether a statement was sent."""
        return ttl.apply(self.client, self.db, self.cluster, plan)

    def expire(self, tenant: str, sids: list[int], cut: int,
               lines: bool = True) -> tuple[int, list[int]]:
        """Delete the lines older than `cut` of the tenant's streams `sids`; how many went,
        and the streams left without a line at or after the cut (for drop_empty). Each
        other stream's range starts at its oldest line left (the label APIs bound a stream
        by it). With `lines` False the tables' TTL removes the lines (it covers these
        streams): only the ranges move."""
        removed, emptied = 0, []
        for i in range(0, len(sids), EXPIRE_STREAMS):
            part = sids[i:i + EXPIRE_STREAMS]
            if lines:
                removed += self._delete(tenant, part, "ts < {cut:Int64}", {"cut": cut})
            emptied += self._start_at_oldest_line(tenant, part, cut)
        return removed, emptied

    def _start_at_oldest_line(self, tenant: str, sids: list[int], cut: int) -> list[int]:
        """Start the range of each of the tenant's streams `sids` that holds a line at or
        after `cut` at the oldest such line; the others, which hold none. Not at the cut:
        the next sweep's cut is later, and a stream starting before it is expired again, so
        every stream was rewritten every sweep, with nothing to remove (issue 22)."""
        oldest = dict(self.client.query(
            f"SELECT stream_id, min(ts) FROM {self.db}.entries WHERE tenant = {{t:String}} "
            "AND stream_id IN {sids:Array(UInt64)} AND ts >= {cut:Int64} GROUP BY stream_id",
            {"t": tenant, "sids": sids, "cut": cut}))
        emptied = [sid for sid in sids if sid not in oldest]
        if not oldest:
            return emptied
        # the rules its lines were stored under stay with the stream (the sweep asks
        # whether the TTL of each covers it)
        kept = [(tenant, sid, labels, oldest[sid], last, rules)
                for sid, labels, last, rules in self.client.query(
                    f"SELECT id, any(labels), max(last_ts), groupUniqArrayArray(rules) "
                    f"FROM {self.db}.streams WHERE id IN {{sids:Array(UInt64)}} GROUP BY id",
                    {"sids": sorted(oldest)})]
        # min() over a stream's rows cannot rise: the rows that start before the cut are
        # replaced by one. A row a push added meanwhile starts at or after it and stays,
        # with the range it brought
        self.client.command(f"DELETE FROM {self._table('streams')} "
                            "WHERE id IN {sids:Array(UInt64)} AND first_ts < {cut:Int64}",
                            {"sids": [row[1] for row in kept], "cut": cut})
        self.client.insert(f"{self.db}.streams", ("tenant", "id", "labels", "first_ts",
                                                  "last_ts", "rules"), kept)
        return emptied

    def _delete(self, tenant: str, sids: list[int], condition: str,
                params: dict[str, Any]) -> int:
        """Delete the entries of the tenant's streams `sids` meeting `condition` and take
        them out of the rollups; how many lines went."""
        where = f"tenant = {{t:String}} AND stream_id IN {{sids:Array(UInt64)}} AND {condition}"
        params = {**params, "t": tenant, "sids": sids}
        # per rule too: a rollup row of one rule only meets the negative totals of its own
        minutes = self.client.query(
            f"SELECT stream_id, ts - positiveModulo(ts, {MINUTE_NS}) AS minute, metadata, "
            f"rule, count(), sum(bytes) FROM {self.db}.entries WHERE {where} "
            "GROUP BY stream_id, minute, metadata, rule", params)
        if not minutes:
            return 0
        self.client.command(f"DELETE FROM {self._table('entries')} WHERE {where}", params)
        self.client.insert(f"{self.db}.rollups", ("tenant", "stream_id", "minute", "metadata",
                                                  "rule", "lines", "bytes"),
                           [(tenant, sid, m, md, rule, -n, -b)
                            for sid, m, md, rule, n, b in minutes])
        return sum(n for *_, n, _ in minutes)

    def drop_empty(self, tenant: str, sids: list[int], since: int | None = None) -> list[int]:
        """Remove those of the tenant's streams `sids` that hold no line any more (none at
        or after `since`, when given: older ones are the TTL's to remove), with their
        postings; the ids removed."""
        empty: list[int] = []
        newer, bound = ("", {}) if since is None else (" AND ts >= {since:Int64}",
                                                       {"since": since})
        for i in range(0, len(sids), EXPIRE_STREAMS):
            part = sids[i:i + EXPIRE_STREAMS]
            held = {sid for (sid,) in self.client.query(
                f"SELECT DISTINCT stream_id FROM {self.db}.entries WHERE tenant = {{t:String}} "
                f"AND stream_id IN {{sids:Array(UInt64)}}{newer}",
                {"t": tenant, "sids": part, **bound})}
            gone = [sid for sid in part if sid not in held]
            if not gone:
                continue
            self.client.command(f"DELETE FROM {self._table('stream_labels')} "
                                "WHERE tenant = {t:String} AND stream_id IN {sids:Array(UInt64)}",
                                {"t": tenant, "sids": gone})
            self.client.command(f"DELETE FROM {self._table('streams')} "
                                "WHERE id IN {sids:Array(UInt64)}", {"sids": gone})
            for sid in gone:
                self.forget(sid)
            empty += gone
        return empty


def _read_batches(held: list[tuple[int, int]]) -> list[list[int]]:
    """Stream ids in batches of at most READ_ROWS lines in all (a larger stream alone) and
    EXPIRE_STREAMS streams."""
    return [[sid for sid, _ in batch]
            for batch in bounded_batches(held, itemgetter(1), READ_ROWS, EXPIRE_STREAMS)]
