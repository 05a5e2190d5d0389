-- Each site's key for signing its requests to other sites (a winner fetching a job's input
-- from the site that holds it): random, made by the site at its first registration and kept.
-- The shared database is what dispatchers already trust with the queue, the awards and the
-- budgets; a site verifies another's request with the key it finds here.
ALTER TABLE dispatchers ADD COLUMN peer_key TEXT;
