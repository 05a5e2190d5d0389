-- Workflows: the owner as a column (lists filter on it) plus the whole record as JSON. Task
-- jobs live in `jobs`; a workflow's record names them.
CREATE TABLE workflows (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name TEXT    NOT NULL,
    data      TEXT    NOT NULL
);
CREATE INDEX workflows_by_user ON workflows (user_name);
