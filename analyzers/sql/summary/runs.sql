-- One row per run: what was ingested. Reads runs, ranks, steps, gpu_ops, collectives,
-- process_groups; writes nothing. Parameter: $runs, a list of run names (NULL = every
-- run), applied inside each aggregate so that the ingest's summary of one run does not
-- count the other runs' ops. The attributed columns come from summary/attributed.sql
-- (analyzers/summary.py joins them).
WITH rk AS (
    -- a rank without a device name: 'GPU (unnamed)' when it ran GPU ops, else 'CPU only'
    SELECT run,
        count(DISTINCT host) AS hosts,
        string_agg(DISTINCT coalesce(nullif(trim(device_name), ''),
                                     CASE WHEN device IS NULL THEN 'CPU only'
                                          ELSE 'GPU (unnamed)' END), ', ') AS devices
    FROM ranks WHERE $runs IS NULL OR list_contains($runs, run) GROUP BY run
), st AS (
    SELECT run, count(DISTINCT step) AS steps, count(*) AS rank_steps,
           median(dur_ns) / 1e6 AS median_step_ms
    FROM steps WHERE $runs IS NULL OR list_contains($runs, run) GROUP BY run
), g AS (
    SELECT run, count(*) AS gpu_ops,
           count(*) FILTER (WHERE kind = 'compute') AS compute_kernels,
           count(*) FILTER (WHERE kind = 'comm') AS comm_kernels,
           count(*) FILTER (WHERE kind IN ('memcpy', 'memset')) AS memory_ops
    FROM gpu_ops WHERE $runs IS NULL OR list_contains($runs, run) GROUP BY run
), c AS (
    SELECT run, count(*) AS collectives,
           count(*) FILTER (WHERE is_p2p) AS p2p,
           string_agg(DISTINCT collective, ', ' ORDER BY collective) AS collective_types
    FROM collectives WHERE $runs IS NULL OR list_contains($runs, run) GROUP BY run
), pg AS (
    SELECT run, count(*) AS process_groups FROM process_groups
    WHERE $runs IS NULL OR list_contains($runs, run) GROUP BY run
)
SELECT
    r.run, r.status, r.world_size, r.n_ranks,
    nullif(rk.hosts, 0) AS hosts, rk.devices,  -- NULL: no trace names its host (as the report's '?')
    coalesce(st.steps, 0) AS steps, st.median_step_ms,
    coalesce(g.gpu_ops, 0) AS gpu_ops, coalesce(g.compute_kernels, 0) AS compute_kernels,
    coalesce(g.comm_kernels, 0) AS comm_kernels, coalesce(g.memory_ops, 0) AS memory_ops,
    coalesce(c.collectives, 0) AS collectives, coalesce(c.p2p, 0) AS p2p_ops,
    c.collective_types,
    coalesce(pg.process_groups, 0) AS process_groups,
    json_array_length(r.failed_files) AS failed_files,
    r.ingested_at
FROM runs r
LEFT JOIN rk USING (run) LEFT JOIN st USING (run) LEFT JOIN g USING (run)
LEFT JOIN c USING (run) LEFT JOIN pg USING (run)
WHERE $runs IS NULL OR list_contains($runs, r.run)
ORDER BY r.run;
