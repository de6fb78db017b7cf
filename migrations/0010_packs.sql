-- Packs (storage/blocks/codec.py FLAG_PACK): a push's lines of one stream, one row of
-- `blocks`, the head since issue 25. The sealer finds them per stream and window, and the
-- pattern miner by the newest entry id they hold; partial indexes, so sealed blocks (nearly
-- all rows of the table) cost them nothing. A release before this one would take packs for
-- sealed blocks and never merge them: it refuses this database (storage/db.py).
CREATE INDEX blocks_packs ON blocks (stream_id, min_ts, rows) WHERE flags & 4;
CREATE INDEX blocks_pack_ids ON blocks (max_id) WHERE flags & 4;
