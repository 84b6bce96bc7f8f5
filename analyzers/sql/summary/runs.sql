-- One row per run: what was ingested. Reads runs, ranks, steps, gpu_ops, collectives,
-- process_groups; writes nothing. Parameter: $runs, a list of run names (NULL = every
-- run), applied inside each aggregate so that the ingest's summary of one run does not
-- count the other runs' ops. The attributed columns come from summary/attributed.sql
-- (analyzers/summary.py joins them). A run without profiler traces takes its world size,
-- hosts and GPU from its NCCL logs, as the report's header does (report/run_info.sql).
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
), nl AS (
    SELECT run, max(nranks) AS world_size,
           CASE WHEN count(cuda_dev) > 0 THEN 'GPU (not named in the NCCL logs)' END AS devices,
           (SELECT count(DISTINCT p.host) FROM nccl_processes p
            WHERE p.run = c.run AND p.host IS NOT NULL) AS hosts
    FROM nccl_comms c WHERE $runs IS NULL OR list_contains($runs, run) GROUP BY run
), nb AS (
    SELECT run, string_agg(DISTINCT d, ', ') AS devices
    FROM (SELECT run, unnest(devices) AS d FROM nccl_bench_summary
          WHERE $runs IS NULL OR list_contains($runs, run))
    GROUP BY run
), pg AS (
    SELECT run, count(*) AS process_groups FROM process_groups
    WHERE $runs IS NULL OR list_contains($runs, run) GROUP BY run
)
SELECT
    r.run, r.status,
    CASE WHEN coalesce(r.n_ranks, 0) = 0 AND coalesce(r.world_size, 0) = 0 THEN nl.world_size
         ELSE r.world_size END AS world_size,
    r.n_ranks,
    -- NULL: no trace names its host (as the report's '?')
    CASE WHEN coalesce(r.n_ranks, 0) = 0 THEN nl.hosts ELSE nullif(rk.hosts, 0) END AS hosts,
    CASE WHEN coalesce(r.n_ranks, 0) = 0 THEN coalesce(nb.devices, nl.devices)
         ELSE rk.devices END AS devices,
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
LEFT JOIN c USING (run) LEFT JOIN pg USING (run) LEFT JOIN nl USING (run)
LEFT JOIN nb USING (run)
WHERE $runs IS NULL OR list_contains($runs, r.run)
ORDER BY r.run;
