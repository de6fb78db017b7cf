-- Sealed blocks (storage/blocks.py, storage/sealing.py, services/sealer.py).
--
-- `entries` becomes the head: new lines land there as before, and the sealer moves them,
-- per stream and time window, into one compressed `blocks` row in the same transaction that
-- deletes them from the head, so a line is in exactly one of the two at every commit.
-- Columns are ordered small to large: a reader that wants the summary, the Bloom filter or
-- the timestamps never pulls in the overflow pages that hold the lines.
CREATE TABLE blocks (
    id        INTEGER PRIMARY KEY,
    stream_id INTEGER NOT NULL,
    min_ts    INTEGER NOT NULL,     -- ns, oldest row
    max_ts    INTEGER NOT NULL,     -- ns, newest row
    rows      INTEGER NOT NULL,
    bytes     INTEGER NOT NULL,     -- UTF-8 bytes of the lines
    min_id    INTEGER NOT NULL,     -- entry ids the rows had in the head
    max_id    INTEGER NOT NULL,
    flags     INTEGER NOT NULL,     -- 1: a line has a backslash; 2: every line is ASCII
    aligned   INTEGER NOT NULL,     -- rows whose ts is a whole minute (rollup window edges)
    md_names  TEXT    NOT NULL,     -- structured-metadata names present, newline-separated
    bloom     BLOB    NOT NULL,     -- trigram Bloom filter of the lines
    keys      BLOB    NOT NULL,     -- zstd: int64 ts deltas, then int64 id deltas
    lengths   BLOB    NOT NULL,     -- zstd: uint32 line byte lengths
    metadata  BLOB    NOT NULL,     -- zstd: int32 per row into the distinct texts; '' if none
    lines     BLOB    NOT NULL      -- zstd: the lines' bytes, concatenated
);
CREATE INDEX blocks_stream_time ON blocks (stream_id, max_ts, min_ts);

-- The highest entry id ever sealed: new head rows get ids above it, so ids stay unique and
-- increasing in arrival order even when the newest rows have left the head.
CREATE TABLE seal_state (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    max_id INTEGER NOT NULL
);
INSERT INTO seal_state (id, max_id) VALUES (1, 0);

-- The FTS5 trigram index over every line is replaced by per-block Bloom filters (measured in
-- bench/REPORT.md, "Issue 11"): the head is small enough to scan inside SQLite.
DROP TRIGGER IF EXISTS entries_fts_after_delete;
DROP TRIGGER IF EXISTS entries_fts_after_update;
DROP TABLE IF EXISTS entries_fts;
DROP TABLE IF EXISTS fts_state;
DROP TABLE IF EXISTS fts_partial;
