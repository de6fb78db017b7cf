-- Grafana-side login sessions (POST /login, services/grafana/sessions.py). Only the SHA-256
-- of a session's token is kept: a copy of the database signs nobody in. Times are unix
-- seconds.
CREATE TABLE gf_session (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    INTEGER NOT NULL,
    token_hash TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL     -- last use, written at most every few minutes
);
CREATE INDEX gf_session_user ON gf_session (user_id);
