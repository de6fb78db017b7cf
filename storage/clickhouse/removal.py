"""Removing lines from ClickHouse: what the compactor does on SQLite's head and blocks
(services/upkeep/compactor.py, services/upkeep/deletes.py), as lightweight DELETEs.

A delete request's lines are picked in Python (its LogQL filter is logstore's own
pipeline) and removed by `seq`; retention removes everything of a stream older than its
cutoff. A stream left with no line goes with its postings, as on SQLite.

Every DELETE of entries is followed by the negative totals of the lines it removed, per
minute and metadata, inserted into the rollups (their SummingMergeTree adds them up), so
that counts from the rollups stay those of the entries. The totals are read before the
DELETE under the same condition. ClickHouse has no transaction over both: a process that
dies between the DELETE and the insert leaves those minutes counting the removed lines.
"""

from __future__ import annotations

from typing import Any, Callable

from logql.model import MINUTE_NS, parse_canonical
from storage.clickhouse import cluster
from storage.retention import StreamInfo

# seqs per DELETE statement
DELETE_BATCH = 5000


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
        return {sid: StreamInfo(tenant, parse_canonical(text), first, last)
                for sid, tenant, text, first, last in self.client.query(
                    f"SELECT id, any(tenant), any(labels), min(first_ts), max(last_ts) "
                    f"FROM {self.db}.streams GROUP BY id")}

    def remove(self, tenant: str, sid: int, start: int, end: int,
               pick: Callable[[str], bool]) -> list[tuple[int, str, int]]:
        """Delete the stream's lines with start <= ts <= end that `pick` takes; (ts, line,
        UTF-8 bytes) of each. `tenant`: the stream's, as streams() gave it."""
        rows = self.client.query(
            f"SELECT seq, ts, line, bytes FROM {self.db}.entries "
            "WHERE tenant = {t:String} AND stream_id = {sid:UInt64} AND ts >= {s:Int64} "
            "AND ts <= {e:Int64} ORDER BY ts, seq",
            {"t": tenant, "sid": sid, "s": start, "e": end})
        gone = [r for r in rows if pick(r[2])]
        for i in range(0, len(gone), DELETE_BATCH):
            self._delete(tenant, sid, "seq IN {seqs:Array(UInt64)}",
                         {"seqs": [r[0] for r in gone[i:i + DELETE_BATCH]]})
        return [(ts, line, size) for _, ts, line, size in gone]

    def expire(self, tenant: str, sid: int, cut: int) -> int:
        """Delete the stream's lines older than `cut`; how many went. The stream's range
        starts at the cut afterwards (the label APIs bound a stream by it)."""
        n = self._delete(tenant, sid, "ts < {cut:Int64}", {"cut": cut})
        rows = self.client.query(
            f"SELECT any(labels), max(last_ts) FROM {self.db}.streams "
            "WHERE id = {sid:UInt64} GROUP BY id", {"sid": sid})
        if rows and rows[0][1] >= cut:
            # min() over the rows cannot rise: the stream's rows are replaced by one
            self.client.command(
                f"DELETE FROM {self._table('streams')} WHERE id = {{sid:UInt64}}", {"sid": sid})
            self.client.insert(f"{self.db}.streams",
                               ("tenant", "id", "labels", "first_ts", "last_ts"),
                               [(tenant, sid, rows[0][0], cut, rows[0][1])])
        return n

    def _delete(self, tenant: str, sid: int, condition: str, params: dict[str, Any]) -> int:
        """Delete the stream's entries meeting `condition` and take them out of the rollups;
        how many lines went."""
        where = f"tenant = {{t:String}} AND stream_id = {{sid:UInt64}} AND {condition}"
        params = {**params, "t": tenant, "sid": sid}
        minutes = self.client.query(
            f"SELECT ts - positiveModulo(ts, {MINUTE_NS}) AS minute, metadata, count(), "
            f"sum(bytes) FROM {self.db}.entries WHERE {where} GROUP BY minute, metadata",
            params)
        if not minutes:
            return 0
        self.client.command(f"DELETE FROM {self._table('entries')} WHERE {where}", params)
        self.client.insert(f"{self.db}.rollups",
                           ("tenant", "stream_id", "minute", "metadata", "lines", "bytes"),
                           [(tenant, sid, m, md, -n, -b) for m, md, n, b in minutes])
        return sum(n for _, _, n, _ in minutes)

    def drop_if_empty(self, tenant: str, sid: int) -> bool:
        """Remove a stream that holds no line any more, with its postings."""
        if self.client.query(f"SELECT 1 FROM {self.db}.entries WHERE tenant = {{t:String}} "
                             "AND stream_id = {sid:UInt64} LIMIT 1", {"t": tenant, "sid": sid}):
            return False
        self.client.command(f"DELETE FROM {self._table('stream_labels')} "
                            "WHERE tenant = {t:String} "
                            "AND stream_id = {sid:UInt64}", {"t": tenant, "sid": sid})
        self.client.command(f"DELETE FROM {self._table('streams')} WHERE id = {{sid:UInt64}}",
                            {"sid": sid})
        self.forget(sid)
        return True
