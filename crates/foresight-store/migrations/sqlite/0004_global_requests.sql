-- The global queue's requests (migrations/postgres/0004_global_requests.sql) live only in the
-- PostgreSQL that peer dispatchers share; nothing changes here. This file keeps the two
-- backends' migration numbers in step.
SELECT 1;
