-- Streams, their label postings and log entries (docs/scale-out.md).
-- `{db}` is the configured database. Statements are separated by lines holding only `;`.

-- A stream's id is a hash of its tenant and canonical labels: every node derives the same
-- id without asking anyone. A push adds a row with the time range it brought; the range of
-- a stream is min/max over its rows (folded by merges).
CREATE TABLE IF NOT EXISTS {db}.streams (
    tenant   String,
    id       UInt64,
    labels   SimpleAggregateFunction(any, String),
    first_ts SimpleAggregateFunction(min, Int64),
    last_ts  SimpleAggregateFunction(max, Int64)
) ENGINE = AggregatingMergeTree
ORDER BY (tenant, id)
;
-- Postings: a matcher on (name, value) becomes stream ids without touching entries.
CREATE TABLE IF NOT EXISTS {db}.stream_labels (
    tenant    String,
    name      String,
    value     String,
    stream_id UInt64
) ENGINE = ReplacingMergeTree
ORDER BY (tenant, name, value, stream_id)
;
-- One row per stored line. `seq` orders lines of equal timestamp as they arrived (the
-- SQLite head's row id); `hash` is the ingester's content hash, so a line pushed twice is
-- found by the ordering key and collapsed by merges even if two nodes stored it. `bytes`
-- repeats the line's UTF-8 length so that counting bytes reads 4 bytes a row, not the line.
CREATE TABLE IF NOT EXISTS {db}.entries (
    tenant    LowCardinality(String),
    stream_id UInt64,
    ts        Int64 CODEC(DoubleDelta, ZSTD(1)),
    hash      UInt64,
    seq       UInt64 CODEC(Delta, ZSTD(1)),
    line      String CODEC(ZSTD(3)),
    bytes     UInt32 CODEC(T64, ZSTD(1)),  -- length(line): counts read this, not the lines
    metadata  String CODEC(ZSTD(1)),  -- '' when none, else the ingester's compact JSON
    INDEX line_tokens line TYPE ngrambf_v1(4, 16384, 3, 0) GRANULARITY 1
) ENGINE = ReplacingMergeTree
PARTITION BY intDiv(ts, 86400000000000)
ORDER BY (tenant, stream_id, ts, hash)
SETTINGS index_granularity = 8192, fsync_after_insert = 1, fsync_part_directory = 1
;
