-- The budgets of global jobs (migrations/postgres/0005_global_budgets.sql) live only in the
-- PostgreSQL that peer dispatchers share; nothing changes here. This file keeps the two
-- backends' migration numbers in step.
SELECT 1;
