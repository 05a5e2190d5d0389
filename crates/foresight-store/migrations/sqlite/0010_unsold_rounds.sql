-- The unsold count of global jobs (migrations/postgres/0010_unsold_rounds.sql) lives only in
-- the PostgreSQL that peer dispatchers share; nothing changes here. This file keeps the two
-- backends' migration numbers in step.
SELECT 1;
