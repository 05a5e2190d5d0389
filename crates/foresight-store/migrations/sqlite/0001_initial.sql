-- Jobs: searchable columns plus the whole record as JSON (the record evolves without
-- migrations; the columns are what queries filter on).
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name    TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    submitted_at INTEGER NOT NULL,
    data         TEXT    NOT NULL
);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_user ON jobs (user_name);

CREATE TABLE reservations (
    id    INTEGER PRIMARY KEY AUTOINCREMENT,
    state TEXT    NOT NULL,
    data  TEXT    NOT NULL
);

CREATE TABLE users (
    name       TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    data       TEXT NOT NULL
);
