-- The writer keeps every stream's id by tenant and label set in memory (storage/stream_ids.py),
-- so `streams` loses the index on (tenant, labels) that its UNIQUE constraint made: a push of
-- new streams wrote an entry of it per stream at a place set by the labels, all over the
-- index (a quarter of a push's WAL for 500 new pods). The writer, the only creator of
-- streams, keeps a label set unique. Reads of a tenant's streams get an index on tenant, whose
-- new entries go at the end of the tenant's range. SQLite drops a constraint only by copying
-- the table.
CREATE TABLE streams_new (
    id          INTEGER PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    labels      TEXT    NOT NULL,   -- canonical sorted form: {a="1", b="2"}
    fingerprint INTEGER NOT NULL,
    first_ts    INTEGER NOT NULL,   -- ns, oldest entry ever written
    last_ts     INTEGER NOT NULL    -- ns, newest entry ever written
);
INSERT INTO streams_new (id, tenant, labels, fingerprint, first_ts, last_ts)
SELECT id, tenant, labels, fingerprint, first_ts, last_ts FROM streams ORDER BY id;
DROP TABLE streams;
ALTER TABLE streams_new RENAME TO streams;
CREATE INDEX streams_tenant ON streams (tenant);
