-- Each peer dispatcher's signing key (migrations/postgres/0013_peer_keys.sql) lives only in
-- the PostgreSQL that peer dispatchers share; nothing changes here. This file keeps the two
-- backends' migration numbers in step.
SELECT 1;
