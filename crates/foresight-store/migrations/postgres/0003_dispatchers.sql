-- Peer dispatchers (`server start --mode dispatcher --site NAME`): several processes, one per
-- site, share this database. Only PostgreSQL serves them (SQLite is one process's file), so
-- this migration has no SQLite counterpart; the tables it adds are unused in single mode.
--
-- Jobs belong to the site whose dispatcher runs them; NULL: a single-mode service's job, or a
-- global job still in the shared queue (owned by nobody).
ALTER TABLE jobs ADD COLUMN site TEXT COLLATE "C";
CREATE INDEX jobs_by_site ON jobs (site);

-- Reservation ids are chosen by each process: scoped by site so that two dispatchers never
-- overwrite each other's ('' in single mode).
ALTER TABLE reservations ADD COLUMN site TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE reservations DROP CONSTRAINT reservations_pkey;
ALTER TABLE reservations ADD PRIMARY KEY (site, id);

-- One row per site that has ever run a dispatcher. A dispatcher is alive while
-- heartbeat_at + lease_ms is in the future, by the database's clock (never a process's).
CREATE TABLE dispatchers (
    site         TEXT COLLATE "C" PRIMARY KEY,
    pid          INTEGER     NOT NULL,
    url          TEXT        NOT NULL DEFAULT '',
    -- Processors of the site's largest cluster: no larger global job can ever be sold.
    max_procs    INTEGER     NOT NULL DEFAULT 0,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    lease_ms     BIGINT      NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL
);

-- The global queue: one row per global job, beside its record in `jobs`.
--   queued   waiting for an auction (or for a site that can run it now)
--   auction  on sale until closes_at; bids in `bids`
--   claimed  awarded to `site` under claim `epoch`, not yet handed to its resource manager
--   started  handed to `site`'s resource manager: the site's job from now on
--   done     ended there (runtime_s feeds the auctions' mean runtime)
-- `epoch` grows at every award and every reclaim: a claim is valid only with its epoch, so a
-- dispatcher that lost its lease cannot start what it was awarded before.
CREATE TABLE global_jobs (
    job_id      BIGINT PRIMARY KEY REFERENCES jobs (id),
    procs       INTEGER     NOT NULL,
    priority    INTEGER     NOT NULL,
    state       TEXT        NOT NULL DEFAULT 'queued',
    site        TEXT COLLATE "C",
    epoch       BIGINT      NOT NULL DEFAULT 0,
    opened_by   TEXT,
    opened_at   TIMESTAMPTZ,
    closes_at   TIMESTAMPTZ,
    claimed_at  TIMESTAMPTZ,
    started_at  TIMESTAMPTZ,
    ended_at    TIMESTAMPTZ,
    runtime_s   DOUBLE PRECISION,
    auctions    INTEGER     NOT NULL DEFAULT 0,
    bidders     INTEGER     NOT NULL DEFAULT 0
);
CREATE INDEX global_jobs_by_state ON global_jobs (state, closes_at);
CREATE INDEX global_jobs_done ON global_jobs (ended_at) WHERE state = 'done';

-- The standing bid of each site in each open auction (one row per site and job: a re-bid
-- replaces it).
CREATE TABLE bids (
    job_id BIGINT           NOT NULL REFERENCES global_jobs (job_id) ON DELETE CASCADE,
    site   TEXT COLLATE "C" NOT NULL,
    price  DOUBLE PRECISION NOT NULL,
    procs  INTEGER          NOT NULL,
    bid_at TIMESTAMPTZ      NOT NULL,
    PRIMARY KEY (job_id, site)
);
