-- What jobs take from and give back to their users' budgets, appended one row per movement,
-- so that charging a job never takes its user's `users` row: a user's budget left is their
-- row's `budget` less the sum of their rows here, and their spending the row's `spent` plus
-- it. Charges and give-backs only append; a check that the budget covers a hold takes the
-- user's budget lock (an advisory lock, not the row) and sums. A user's rows are folded
-- into their `users` row now and then (when the budget is changed, or when they pile up).
CREATE TABLE budget_ledger (
    id        BIGSERIAL PRIMARY KEY,
    user_name TEXT COLLATE "C" NOT NULL,
    amount    DOUBLE PRECISION NOT NULL
);
CREATE INDEX budget_ledger_user ON budget_ledger (user_name);
