-- The ledger of budget movements (migrations/postgres/0012_budget_ledger.sql) lives only in
-- the PostgreSQL that peer dispatchers share; a service of its own writes its users' budgets
-- with their records. This file keeps the two backends' migration numbers in step.
SELECT 1;
