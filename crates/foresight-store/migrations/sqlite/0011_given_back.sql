-- Whether a global job was given back (migrations/postgres/0011_given_back.sql) lives only
-- in the PostgreSQL that peer dispatchers share; nothing changes here. This file keeps the
-- two backends' migration numbers in step.
SELECT 1;
