-- Every site gets a number, fixed at its first registration and never reused: the auction's
-- rule `tie = "lowest_site"` means the lowest site id (foresight_core::auction::SiteId), as in
-- `sim auction`, not the lowest name. Sites already registered are numbered in the order of
-- their names, so that ties between them go where they went before; later sites take the
-- next numbers in the order they register (GlobalQueue::register).
ALTER TABLE dispatchers ADD COLUMN id INTEGER;
UPDATE dispatchers d SET id = n.id
    FROM (SELECT site, (row_number() OVER (ORDER BY site) - 1)::integer AS id FROM dispatchers) n
    WHERE n.site = d.site;
ALTER TABLE dispatchers ALTER COLUMN id SET NOT NULL;
ALTER TABLE dispatchers ADD CONSTRAINT dispatchers_id_unique UNIQUE (id);
ALTER TABLE dispatchers ADD CONSTRAINT dispatchers_id_range CHECK (id >= 0);
