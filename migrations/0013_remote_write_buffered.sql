-- How many samples each remote-write client has buffered, kept by the statements that add
-- and remove them (storage/rules.py): the bound on the buffer (max_buffered_samples) and
-- the buffered-samples gauge read it instead of counting up to a million rows per
-- evaluation and per scrape while a receiver is away.
CREATE TABLE remote_write_buffered (
    client  TEXT    NOT NULL PRIMARY KEY,
    samples INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO remote_write_buffered (client, samples)
SELECT client, count(*) FROM remote_write_buffer GROUP BY client;
