-- Streams, their label postings, log entries and per-minute rollups.

CREATE TABLE streams (
    id          INTEGER PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    labels      TEXT    NOT NULL,   -- canonical sorted form: {a="1", b="2"}
    fingerprint INTEGER NOT NULL,
    first_ts    INTEGER NOT NULL,   -- ns, oldest entry ever written
    last_ts     INTEGER NOT NULL,   -- ns, newest entry ever written
    UNIQUE (tenant, labels)
);

-- Postings: a matcher on (name, value) becomes stream ids without touching entries.
CREATE TABLE stream_labels (
    tenant    TEXT    NOT NULL,
    name      TEXT    NOT NULL,
    value     TEXT    NOT NULL,
    stream_id INTEGER NOT NULL,
    PRIMARY KEY (tenant, name, value, stream_id)
) WITHOUT ROWID;

CREATE TABLE entries (
    id        INTEGER PRIMARY KEY,
    stream_id INTEGER NOT NULL,
    ts        INTEGER NOT NULL,     -- ns
    hash      INTEGER NOT NULL,     -- of line and metadata: exact duplicates are stored once
    line      TEXT    NOT NULL,
    metadata  TEXT                  -- structured metadata as a JSON object, NULL when none
);
-- One index serves both the per-stream time-range scan and duplicate detection.
CREATE UNIQUE INDEX entries_stream_ts ON entries (stream_id, ts, hash);

-- Lines and bytes per stream, minute and structured-metadata set: metric queries without
-- line filters and the volume/stats APIs read these instead of entries. Metadata is part of
-- the key because it is part of every result series' labels.
CREATE TABLE rollups (
    stream_id INTEGER NOT NULL,
    minute    INTEGER NOT NULL,     -- ns of the minute start
    metadata  TEXT    NOT NULL,     -- '' when none, else the entries.metadata text
    lines     INTEGER NOT NULL,
    bytes     INTEGER NOT NULL,
    PRIMARY KEY (stream_id, minute, metadata)
) WITHOUT ROWID;
