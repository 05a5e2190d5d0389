-- How many times a global job's auction closed without a valid bid, so that operators can
-- tell a job never auctioned from one nobody bought (`auction list`, `/metrics`). Counted by
-- the dispatcher that settles the close, in the transaction that queues or reopens the job.
ALTER TABLE global_jobs ADD COLUMN unsold INTEGER NOT NULL DEFAULT 0;
