-- Trigram full-text prefilter over entries.line (storage/fts.py, services/indexer.py).
--
-- Not maintained by the push path: the indexer service folds committed rows into the index
-- in batches and records how far it got in fts_state.indexed_through (the high-water mark).
-- Rows with id <= indexed_through are in the index; rows above it are the unindexed tail that
-- a query scans plainly.
--
-- Contentless: the text stays in entries only. FTS5 stops tokenizing a line at its first NUL
-- character, so the ids of lines holding one are kept in fts_partial and always offered as
-- candidates (SQLite's replace() cannot rewrite NUL, and a custom function would have to
-- exist on every connection that deletes). Trigrams are folded to lower case so one index serves case-sensitive and case-insensitive needles.
-- detail=none keeps rowids only: about a third of the size of detail=full, but no phrase
-- queries, so storage/fts.py ANDs single trigrams and the caller re-checks every candidate
-- exactly. columnsize=0: no per-row token counts, nothing here ranks.
CREATE VIRTUAL TABLE entries_fts USING fts5(
    line,
    content = '',
    tokenize = 'trigram case_sensitive 0',
    detail = none,
    columnsize = 0
);

CREATE TABLE fts_state (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_through INTEGER NOT NULL    -- entries.id high-water mark; 0 = nothing indexed
);
INSERT INTO fts_state (id, indexed_through) VALUES (1, 0);

-- Indexed entries whose line contains NUL: the index saw only the text before it.
CREATE TABLE fts_partial (id INTEGER PRIMARY KEY);

-- Deleting an indexed entry removes its trigrams (a contentless index needs exactly the text
-- it was given for that). If the deleted row was the high-water mark itself, the mark moves
-- down to the highest surviving id below it: SQLite gives a new row max(id) + 1, so without this a
-- reused id at or below the mark would never be indexed and never scanned.
CREATE TRIGGER entries_fts_after_delete AFTER DELETE ON entries
WHEN old.id <= (SELECT indexed_through FROM fts_state WHERE id = 1)
BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, line) VALUES ('delete', old.id, old.line);
    DELETE FROM fts_partial WHERE id = old.id;
    UPDATE fts_state
       SET indexed_through = coalesce((SELECT max(e.id) FROM entries e
                                        WHERE e.id <= fts_state.indexed_through), 0)
     WHERE id = 1 AND indexed_through = old.id;
END;

-- Entries are never rewritten today; should a line change, its trigrams follow.
CREATE TRIGGER entries_fts_after_update AFTER UPDATE OF line ON entries
WHEN old.id <= (SELECT indexed_through FROM fts_state WHERE id = 1)
BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, line) VALUES ('delete', old.id, old.line);
    INSERT INTO entries_fts (rowid, line) VALUES (new.id, new.line);
    DELETE FROM fts_partial WHERE id = old.id;
    INSERT INTO fts_partial (id) SELECT new.id WHERE instr(CAST(new.line AS BLOB), x'00') > 0;
END;
