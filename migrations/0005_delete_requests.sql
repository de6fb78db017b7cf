-- Log deletion requests (spec/http-api.md section 14; services/deletes.py).
--
-- A request split by max_interval is several pieces under one request_id; each piece is
-- processed (its lines removed from disk by the compactor) on its own, so the status of a
-- request is read from its pieces: none processed, some ("<n>% Complete") or all.
-- A cancelled request is removed.
CREATE TABLE delete_requests (
    tenant     TEXT    NOT NULL,
    request_id TEXT    NOT NULL,    -- 8 lower-case hex characters
    seq        INTEGER NOT NULL,    -- piece number
    query      TEXT    NOT NULL,
    start_ns   INTEGER NOT NULL,    -- lines with start_ns <= ts <= end_ns are deleted
    end_ns     INTEGER NOT NULL,
    created_at REAL    NOT NULL,    -- unix seconds
    processed  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, request_id, seq)
) WITHOUT ROWID;

-- Per tenant: a number that changes whenever cached query results must be thrown away.
CREATE TABLE cache_generation (
    tenant     TEXT    PRIMARY KEY,
    generation INTEGER NOT NULL
) WITHOUT ROWID;
