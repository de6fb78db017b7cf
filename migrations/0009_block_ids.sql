-- Block ids are never given twice (storage/blocks/catalog.py keeps a block's summary in
-- memory by its id). SQLite gives a new row the highest id + 1, so a block inserted after
-- the newest one was deleted (a merge, a delete request, retention) took that id again;
-- blocks now take their ids from last_block_id. `lineage` tells databases apart that share a
-- path and an inode over one process's life (a test's file replaced by another).
ALTER TABLE seal_state ADD COLUMN last_block_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE seal_state ADD COLUMN lineage INTEGER NOT NULL DEFAULT 0;
UPDATE seal_state
SET last_block_id = (SELECT coalesce(max(id), 0) FROM blocks),
    lineage = random()
WHERE id = 1;
