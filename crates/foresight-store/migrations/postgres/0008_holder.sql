-- The holder of an SQLite file is recorded in it (migrations/sqlite/0008_holder.sql); a
-- PostgreSQL database's holder is the session holding its advisory lock, which the server
-- names itself. This file keeps the two backends' migration numbers in step.
SELECT 1;
