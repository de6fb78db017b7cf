-- A node that does not mine the patterns (a cluster's follower, docs/scale-out.md) learns
-- what the miner wrote since its last look instead of reading every template again
-- (storage/patterns.py `templates`): each write of templates raises pattern_state.version
-- and stamps the templates it wrote with it, and the clusters the expiry drops are listed
-- with it in pattern_dropped, the last two rounds of them (drops up to forgotten_upto are no
-- longer listed: a follower that looked before that reads every template again).
ALTER TABLE pattern_clusters ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
CREATE INDEX pattern_clusters_version ON pattern_clusters (version);
ALTER TABLE pattern_state ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pattern_state ADD COLUMN forgotten_upto BIGINT NOT NULL DEFAULT 0;
CREATE TABLE pattern_dropped (
    version    BIGINT NOT NULL,
    stream_id  BIGINT NOT NULL,
    cluster_id BIGINT NOT NULL,
    PRIMARY KEY (version, stream_id, cluster_id)
);
