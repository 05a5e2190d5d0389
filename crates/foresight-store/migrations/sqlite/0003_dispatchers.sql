-- Peer dispatchers share one PostgreSQL database (migrations/postgres/0003_dispatchers.sql);
-- an SQLite file serves one process, so nothing changes here. This file keeps the two
-- backends' migration numbers in step.
SELECT 1;
