-- Rules and alerts (spec/http-api.md section 13; services/ruler.py).
--
-- A rule group is kept as the YAML the API shows for it (normalised), per tenant,
-- namespace and name.
CREATE TABLE rule_groups (
    tenant     TEXT    NOT NULL,
    namespace  TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    updated_at REAL    NOT NULL,    -- unix seconds
    PRIMARY KEY (tenant, namespace, name)
) WITHOUT ROWID;

-- Each alert instance of an alerting rule, so that a restart keeps `for:` timers and what
-- was sent: rule_key names the rule within its group ("<index>:<alert name>"), labels is
-- the instance's canonical label set. Times are unix nanoseconds, 0 when unset.
CREATE TABLE alert_states (
    tenant      TEXT    NOT NULL,
    namespace   TEXT    NOT NULL,
    group_name  TEXT    NOT NULL,
    rule_key    TEXT    NOT NULL,
    labels      TEXT    NOT NULL,
    state       TEXT    NOT NULL,   -- pending | firing | inactive (resolved)
    active_at   INTEGER NOT NULL,
    fired_at    INTEGER NOT NULL,
    resolved_at INTEGER NOT NULL,
    last_sent_at INTEGER NOT NULL,
    keep_firing_since INTEGER NOT NULL,
    value       REAL    NOT NULL,
    annotations TEXT    NOT NULL,   -- JSON object
    PRIMARY KEY (tenant, namespace, group_name, rule_key, labels)
) WITHOUT ROWID;

-- Recording rule samples waiting for a remote-write receiver, per client, oldest first.
CREATE TABLE remote_write_buffer (
    id      INTEGER PRIMARY KEY,
    client  TEXT    NOT NULL,
    tenant  TEXT    NOT NULL,
    labels  TEXT    NOT NULL,       -- JSON object, __name__ included
    ts_ms   INTEGER NOT NULL,
    value   REAL    NOT NULL
);
CREATE INDEX remote_write_buffer_client ON remote_write_buffer (client, id);
