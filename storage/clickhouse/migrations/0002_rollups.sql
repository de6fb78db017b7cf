-- Per-minute rollups (docs/scale-out.md): lines and bytes per stream, metadata and minute,
-- so that counts on whole minutes read a row per minute instead of a row per line.
-- Signed sums: the compactor corrects a minute by inserting the negative counts of the
-- lines it deletes (storage/clickhouse/removal.py). Merges add up the rows of a key and drop
-- a key whose sums are 0; reads always sum(), as parts not yet merged hold several rows.
CREATE TABLE IF NOT EXISTS {db}.rollups (
    tenant    LowCardinality(String),
    stream_id UInt64,
    minute    Int64 CODEC(DoubleDelta, ZSTD(1)),  -- the minute's first nanosecond (floored)
    metadata  String CODEC(ZSTD(1)),
    lines     Int64,
    bytes     Int64
) ENGINE = SummingMergeTree((lines, bytes))
ORDER BY (tenant, stream_id, minute, metadata)
;
-- Every insert into entries (pushes, copy-to-clickhouse) adds its block's totals here in
-- the same statement. Lines are floored to their minute (positiveModulo: a timestamp before
-- 1970 belongs to the minute below it, as on SQLite).
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.rollups_mv TO {db}.rollups AS
SELECT tenant, stream_id, ts - positiveModulo(ts, 60000000000) AS minute, metadata,
       toInt64(count()) AS lines, toInt64(sum(bytes)) AS bytes
FROM {db}.entries
GROUP BY tenant, stream_id, minute, metadata
;
-- The lines stored before this migration. It runs at start-up, before the node takes a
-- push; nodes sharing the database are upgraded stopped (a line inserted by another node
-- between the view and this statement would be counted twice).
INSERT INTO {db}.rollups (tenant, stream_id, minute, metadata, lines, bytes)
SELECT tenant, stream_id, ts - positiveModulo(ts, 60000000000) AS minute, metadata,
       toInt64(count()), toInt64(sum(bytes))
FROM {db}.entries
GROUP BY tenant, stream_id, minute, metadata
