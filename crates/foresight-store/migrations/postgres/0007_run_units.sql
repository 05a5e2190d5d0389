-- A global job's run is kept in seconds on the reference processor (its elapsed time at the
-- speed of the slowest processor it ran on). Rows written before hold the elapsed time on
-- the job's clusters: they keep on_reference = FALSE, and the service converts them at start
-- from the speeds of the clusters the job ran on, or drops them when it cannot.
ALTER TABLE runs ADD COLUMN on_reference BOOLEAN NOT NULL DEFAULT FALSE;
