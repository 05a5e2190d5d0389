-- Site ids number the peer dispatchers of a shared PostgreSQL queue
-- (migrations/postgres/0009_site_ids.sql); an SQLite file has no dispatchers. This file keeps
-- the two backends' migration numbers in step.
SELECT 1;
