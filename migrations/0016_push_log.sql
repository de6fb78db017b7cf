-- Pushes answered from the push log (storage/push_log.py) before they are stored here: the
-- newest record stored, raised in the transaction that stores it, so that a start stores
-- again exactly the records after it.
CREATE TABLE push_log (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    applied INTEGER NOT NULL
);
INSERT INTO push_log (id, applied) VALUES (1, 0);
