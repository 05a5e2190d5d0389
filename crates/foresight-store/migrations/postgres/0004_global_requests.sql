-- Cancel, hold and release of global jobs from any dispatcher, auctions reopened after a
-- back-off (`unsold = { rule = "reopen" }`), and budgets kept in the database.
--
-- New states of `global_jobs.state`:
--   held       taken off sale by its owner (`job hold`, or submitted with --hold): not
--              auctioned until released (back to `queued`)
--   cancelled  cancelled before any site started it: never runs
-- Both void a claim (epoch + 1), in the transaction that takes the row with FOR UPDATE, so a
-- winner starting the job at the same moment either starts it first (and the cancel becomes
-- a request to its site) or finds its claim void and starts nothing.
--
-- cancel_requested: the job was cancelled after its site started it; that site's dispatcher
-- stops it (kills it if running) and clears the flag.
ALTER TABLE global_jobs ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX global_jobs_cancel_requested ON global_jobs (site) WHERE cancel_requested;

-- Budgets shared by the sites: a user's budget and spending live in their `users` row, which
-- every dispatcher changes only inside transactions (never from its cached copy):
-- budget_hold is what the site that started the job took from its user's budget, in the
-- transaction that started it (refused when less is left: two sites cannot both spend the
-- last of a budget); it is given back when the job ends, while its real cost is charged
-- with the update of its record.
ALTER TABLE global_jobs ADD COLUMN budget_hold DOUBLE PRECISION NOT NULL DEFAULT 0;
