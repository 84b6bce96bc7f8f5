-- Run $run's clock_offsets rows, hosts in the order of their lowest rank, then the ranks
-- whose clock is not their host's. Parameters: $run.
SELECT o.host, o.rank, o.offset_ns, o.drift_ppm, o.ref_ns, o.residual_ns, o.n_matched,
    o.aligned, o.note
FROM clock_offsets o
LEFT JOIN (SELECT host, min(rank) AS first_rank FROM ranks WHERE run = $run GROUP BY host) h
    USING (host)
WHERE o.run = $run
ORDER BY o.rank IS NOT NULL, coalesce(o.rank, h.first_rank), o.host
