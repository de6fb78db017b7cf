-- Patterns (spec/http-api.md section 7; services/patterns.py).
--
-- Each stream's mined templates (services/pattern_miner.py) and how many lines each had per
-- 10-second bucket; pattern_state.mined_id is the highest head entry id already mined.
CREATE TABLE pattern_clusters (
    stream_id  INTEGER NOT NULL,
    cluster_id INTEGER NOT NULL,
    template   TEXT    NOT NULL,    -- JSON list of tokens, "<*>" for variables
    line       TEXT    NOT NULL,    -- the line that started it
    spans      TEXT    NOT NULL,    -- JSON list of [start, end] per token in `line`
    gaps       TEXT    NOT NULL,    -- JSON list of token positions with left-out details
    level      TEXT    NOT NULL,
    pattern    TEXT    NOT NULL,    -- as the API prints it
    PRIMARY KEY (stream_id, cluster_id)
) WITHOUT ROWID;

CREATE TABLE pattern_samples (
    stream_id  INTEGER NOT NULL,
    cluster_id INTEGER NOT NULL,
    bucket     INTEGER NOT NULL,    -- unix seconds, a multiple of 10
    count      INTEGER NOT NULL,
    PRIMARY KEY (stream_id, cluster_id, bucket)
) WITHOUT ROWID;
CREATE INDEX pattern_samples_bucket ON pattern_samples (bucket);

CREATE TABLE pattern_state (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    mined_id INTEGER NOT NULL
);
