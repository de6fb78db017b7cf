-- Grafana side: organisations, users (service accounts are users), teams, tokens,
-- folders and dashboards (one table, one id sequence, as in Grafana), tags, stars and
-- managed permissions. Every table is prefixed gf_ so the Loki side never collides.

CREATE TABLE gf_org (
    id      INTEGER PRIMARY KEY,
    name    TEXT NOT NULL UNIQUE,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);

-- Humans and service accounts. Service accounts have no password and log in only by token.
CREATE TABLE gf_user (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    uid                TEXT    NOT NULL UNIQUE,
    login              TEXT    NOT NULL UNIQUE,
    email              TEXT    NOT NULL,
    name               TEXT    NOT NULL,
    password_hash      TEXT    NOT NULL DEFAULT '',   -- 'pbkdf2_sha256$iterations$salt$hex'
    is_admin           INTEGER NOT NULL DEFAULT 0,    -- Grafana server admin
    is_service_account INTEGER NOT NULL DEFAULT 0,
    is_disabled        INTEGER NOT NULL DEFAULT 0,
    org_id             INTEGER NOT NULL,              -- current org
    created            TEXT    NOT NULL,
    updated            TEXT    NOT NULL
);
CREATE UNIQUE INDEX gf_user_email ON gf_user (email) WHERE email <> '';

CREATE TABLE gf_org_user (
    org_id  INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    role    TEXT    NOT NULL,                         -- Admin | Editor | Viewer | None
    created TEXT    NOT NULL,
    updated TEXT    NOT NULL,
    PRIMARY KEY (org_id, user_id)
) WITHOUT ROWID;
CREATE INDEX gf_org_user_user ON gf_org_user (user_id);

CREATE TABLE gf_team (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    uid     TEXT    NOT NULL UNIQUE,
    org_id  INTEGER NOT NULL,
    name    TEXT    NOT NULL,
    email   TEXT    NOT NULL DEFAULT '',
    created TEXT    NOT NULL,
    updated TEXT    NOT NULL,
    UNIQUE (org_id, name)
);

CREATE TABLE gf_team_member (
    team_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    PRIMARY KEY (team_id, user_id)
) WITHOUT ROWID;
CREATE INDEX gf_team_member_user ON gf_team_member (user_id, team_id);

-- Service-account tokens: only a hash of the secret is kept; the key is shown once.
CREATE TABLE gf_token (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id             INTEGER NOT NULL,
    service_account_id INTEGER NOT NULL,
    name               TEXT    NOT NULL,
    hash               TEXT    NOT NULL UNIQUE,
    created            TEXT    NOT NULL,
    expires            INTEGER,                      -- unix seconds, NULL = never
    last_used_at       TEXT,
    UNIQUE (service_account_id, name)
);

-- Folders and dashboards share one id sequence (AUTOINCREMENT: ids are never reused).
-- parent_id is the containing folder, NULL for the root (General).
CREATE TABLE gf_dashboard (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id     INTEGER NOT NULL,
    uid        TEXT    NOT NULL,
    title      TEXT    NOT NULL,
    slug       TEXT    NOT NULL,
    is_folder  INTEGER NOT NULL,
    parent_id  INTEGER,
    data       TEXT    NOT NULL,                     -- dashboard JSON model; folder: {"description":..}
    version    INTEGER NOT NULL,
    created    TEXT    NOT NULL,
    updated    TEXT    NOT NULL,
    created_by INTEGER NOT NULL,
    updated_by INTEGER NOT NULL,
    UNIQUE (org_id, uid)
);
-- search windows are cut in binary title order: this index delivers rows already ordered
CREATE INDEX gf_dashboard_title ON gf_dashboard (org_id, title, id);
CREATE INDEX gf_dashboard_parent ON gf_dashboard (org_id, parent_id, is_folder);

-- A dashboard's distinct tags; (term, dashboard_id) turns a tag filter into ids.
CREATE TABLE gf_dashboard_tag (
    dashboard_id INTEGER NOT NULL,
    term         TEXT    NOT NULL,
    PRIMARY KEY (dashboard_id, term)
) WITHOUT ROWID;
CREATE INDEX gf_dashboard_tag_term ON gf_dashboard_tag (term, dashboard_id);

CREATE TABLE gf_star (
    user_id      INTEGER NOT NULL,
    dashboard_id INTEGER NOT NULL,
    PRIMARY KEY (user_id, dashboard_id)
) WITHOUT ROWID;
CREATE INDEX gf_star_dashboard ON gf_star (dashboard_id);

-- Managed permissions: one subject (user, team or basic role) and a level on one folder or
-- dashboard. level: 1 View, 2 Edit, 4 Admin.
CREATE TABLE gf_permission (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    org_id    INTEGER NOT NULL,
    object_id INTEGER NOT NULL,                      -- gf_dashboard.id (folder or dashboard)
    user_id   INTEGER,
    team_id   INTEGER,
    role      TEXT,
    level     INTEGER NOT NULL,
    created   TEXT    NOT NULL,
    updated   TEXT    NOT NULL,
    CHECK ((user_id IS NOT NULL) + (team_id IS NOT NULL) + (role IS NOT NULL) = 1)
);
CREATE INDEX gf_permission_object ON gf_permission (object_id);
CREATE INDEX gf_permission_user ON gf_permission (user_id, level, object_id) WHERE user_id IS NOT NULL;
CREATE INDEX gf_permission_team ON gf_permission (team_id, level, object_id) WHERE team_id IS NOT NULL;
CREATE INDEX gf_permission_role ON gf_permission (org_id, role, level, object_id) WHERE role IS NOT NULL;
