-- The retention_stream rule a line was stored under (services/upkeep/compactor.py
-- rule_number; 0: none, the tenant's retention_period), so that the tables' TTL removes the
-- lines of a rule, and their rollups, after that rule's period (storage/clickhouse/ttl.py);
-- and the rules each stream's lines were stored under, so that the compactor knows which
-- streams a rule's TTL covers. Lines stored before this migration have 0, their streams [0].
ALTER TABLE {db}.entries ADD COLUMN IF NOT EXISTS rule UInt32 DEFAULT 0 CODEC(T64, ZSTD(1))
;
ALTER TABLE {db}.streams ADD COLUMN IF NOT EXISTS
    rules SimpleAggregateFunction(groupUniqArrayArray, Array(UInt32)) DEFAULT [0]
;
-- A rollup row per rule too: merges add up the rows of one rule only, so that the TTL of
-- a rule takes exactly its lines' counts, and the compactor's negative totals of deleted
-- lines (storage/clickhouse/removal.py) meet the rows they cancel. (No DEFAULT: a column in
-- the sorting key may not have one; a UInt32 is 0 without.)
ALTER TABLE {db}.rollups ADD COLUMN IF NOT EXISTS rule UInt32,
    MODIFY ORDER BY (tenant, stream_id, minute, metadata, rule)
;
-- The view again, with the rule (nodes are upgraded stopped: no insert falls between)
DROP VIEW IF EXISTS {db}.rollups_mv
;
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.rollups_mv TO {db}.rollups AS
SELECT tenant, stream_id, ts - positiveModulo(ts, 60000000000) AS minute, metadata, rule,
       toInt64(count()) AS lines, toInt64(sum(bytes)) AS bytes
FROM {db}.entries
GROUP BY tenant, stream_id, minute, metadata, rule
