-- How many samples each remote-write client has buffered (the SQLite file's migration 0013).
CREATE TABLE remote_write_buffered (
    client  TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    samples BIGINT NOT NULL
);
INSERT INTO remote_write_buffered (client, samples)
SELECT client, count(*) FROM remote_write_buffer GROUP BY client;
