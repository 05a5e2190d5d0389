-- Who holds this database: the one service that has it locked (src/sqlite_lock.rs), written
-- once its lock is held, so that a second service that is refused the file can name it.
CREATE TABLE holder (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    host     TEXT    NOT NULL,
    pid      INTEGER NOT NULL,
    data_dir TEXT,
    since    TEXT    NOT NULL
);
