-- Schema version 8 (migration 8, ingest/schema.py): clock_offsets, each host's clock
-- against the host of the lowest rank as estimated from the ends of matched collectives
-- and send/recv pairs (docs/timeline.md, "Clocks"; analyzers/clocks.py), and the view
-- rank_clocks that every reader aligning times of different hosts uses. Registered as
-- owned, per run; empty for the runs of older versions (re-ingest a run to fill it, the
-- view then gives them offset 0); no parameters.
CREATE TABLE IF NOT EXISTS clock_offsets (
    run VARCHAR,
    host VARCHAR,
    rank INTEGER,                -- NULL: the whole host; set: a rank whose clock is not its host's
    offset_ns BIGINT,            -- the clock's lead over the reference at ref_ns
    drift_ppm DOUBLE,            -- its lead grows by this many ns per ms (0: no drift term)
    ref_ns BIGINT,               -- the reference time of offset_ns (the first matched end)
    residual_ns BIGINT,          -- after alignment: median |end - the instance's median end|
    n_matched BIGINT,            -- matched instances the host took part in with another host
    aligned BOOLEAN,             -- used to align (false: too few instances or too large a residual)
    note VARCHAR                 -- why not aligned, or NULL
);
INSERT OR REPLACE INTO stepscope_tables VALUES ('clock_offsets', 'analyzers.clocks', true, 8);

-- Per rank, the correction of its times (docs/timeline.md): aligned = t - offset_ns -
-- drift_ppm * 1e-6 * (t - ref_ns). A rank's own row, else its host's; 0 when its clock was
-- not aligned or the run has no rows.
CREATE OR REPLACE VIEW rank_clocks AS
SELECT r.run, r.rank, r.host,
    CASE WHEN coalesce(k.aligned, h.aligned, false)
         THEN coalesce(k.offset_ns, h.offset_ns, 0) ELSE 0 END AS offset_ns,
    CASE WHEN coalesce(k.aligned, h.aligned, false)
         THEN coalesce(k.drift_ppm, h.drift_ppm, 0) ELSE 0 END AS drift_ppm,
    coalesce(k.ref_ns, h.ref_ns, 0) AS ref_ns,
    coalesce(k.aligned, h.aligned, false) AS aligned
FROM ranks r
LEFT JOIN clock_offsets h ON h.run = r.run AND h.rank IS NULL
    AND h.host = coalesce(r.host, 'rank ' || r.rank)
LEFT JOIN clock_offsets k ON k.run = r.run AND k.rank = r.rank;
