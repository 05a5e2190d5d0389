-- The statistics store of runtime prediction: one row per finished run of a job, keyed by
-- who ran what (user; application: `--app` or the program; its parameters: processors and
-- arguments) on which processor type (the cluster; NULL for a global job, whose runtimes
-- are on the reference processor). Rows are only ever added; the service reads back the
-- last few per user and per application key at start.
CREATE TABLE runs (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id    INTEGER NOT NULL,
    user_name TEXT    NOT NULL,
    app       TEXT    NOT NULL,
    params    TEXT    NOT NULL,
    cluster   TEXT,
    runtime   INTEGER NOT NULL,
    ended_at  INTEGER NOT NULL
);
CREATE INDEX runs_by_user ON runs (user_name, id);
CREATE INDEX runs_by_app ON runs (app, params, cluster, id);
