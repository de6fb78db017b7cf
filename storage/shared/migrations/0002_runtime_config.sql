-- runtime_config.file as the nodes of a cluster share it (services/runtime/overrides.py): the
-- text a node last read from its file, numbered; every node applies the newest number.
CREATE TABLE runtime_config (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL,
    text    TEXT NOT NULL,
    node    TEXT COLLATE "C" NOT NULL,
    updated BIGINT NOT NULL     -- ns, the publishing node's clock
);
