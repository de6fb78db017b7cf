-- Every seal (rows moved from the head into a block) raises `seals`: a second reader
-- connection (storage/second_reader.py) takes part of a read only when its snapshot saw
-- as many seals as the reader's, so that no row moved between the two is missed.
ALTER TABLE seal_state ADD COLUMN seals INTEGER NOT NULL DEFAULT 0;
