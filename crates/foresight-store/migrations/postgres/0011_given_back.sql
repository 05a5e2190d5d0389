-- Whether a global job was given back to the auction by a site that won it but could not
-- start it at once (`give_back`), so that a job's view says so from this fact rather than
-- from the words of its reason. Set by the give-back, in the transaction that requeues it.
ALTER TABLE global_jobs ADD COLUMN given_back BOOLEAN NOT NULL DEFAULT false;
