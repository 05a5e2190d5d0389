-- Budgets of global jobs before they start, in dispatcher mode.
--
-- max_tariff: the highest base tariff (per processor-second) of a site's clusters. A global
-- job may win at any site, so what it may cost at worst is its processors × walltime × the
-- highest tariff of any site.
ALTER TABLE dispatchers ADD COLUMN max_tariff DOUBLE PRECISION NOT NULL DEFAULT 0;

-- worst_case: what the job may cost at worst, set at submission. The worst cases of a user's
-- global jobs that have not started count against their budget when they submit another,
-- in the transaction that stores it, with their `users` row taken FOR UPDATE (so two sites
-- cannot both admit the last of a budget).
ALTER TABLE global_jobs ADD COLUMN worst_case DOUBLE PRECISION NOT NULL DEFAULT 0;

-- A new state of `global_jobs.state`:
--   over_budget  awarded, but its user's budget had less left than it may cost at the
--                winner: off sale (its record's reason says what it needs and what is
--                left) until the user's budget changes or a hold comes back, then queued
--                again.
-- needs: what it needed when it was set aside.
ALTER TABLE global_jobs ADD COLUMN needs DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE INDEX global_jobs_over_budget ON global_jobs (job_id) WHERE state = 'over_budget';
