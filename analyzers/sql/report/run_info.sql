-- The identity of run $run for the report's `run` section: status, world size, ranks
-- ingested, failed files, the most common device name, hosts, timeline, host source
-- and step sources, and the `--ranks` subset. Reads runs, ranks, step_attribution,
-- run_nodes. Parameter: $run.
-- A run without profiler traces (NCCL logs alone) takes its world size, hosts and GPU
-- name from the logs: the largest communicator, the logging hosts, nccl-tests' devices;
-- logs that name no GPU (NCCL_DEBUG lines give cudaDev and busId only) give
-- 'GPU (not named in the NCCL logs)'; Flight Recorder dumps alone (an NCCL backend)
-- 'GPU (not named in the Flight Recorder dumps)', their hosts from nccl_sources.
SELECT r.run, r.status,
    CASE WHEN coalesce(r.n_ranks, 0) = 0 AND coalesce(r.world_size, 0) = 0
         THEN (SELECT max(nranks) FROM nccl_comms WHERE run = $run)
         ELSE r.world_size END AS world_size,
    r.n_ranks, r.failed_files,
    coalesce(
        (SELECT mode(coalesce(nullif(trim(device_name), ''), CASE WHEN device IS NULL THEN 'CPU only'
                                                ELSE 'GPU (unnamed)' END))
         FROM ranks WHERE run = $run),
        (SELECT mode(d) FROM (SELECT unnest(devices) AS d FROM nccl_bench_summary
                              WHERE run = $run AND coalesce(r.n_ranks, 0) = 0)),
        (SELECT 'GPU (not named in the NCCL logs)' FROM nccl_comms
         WHERE run = $run AND coalesce(r.n_ranks, 0) = 0 AND cuda_dev IS NOT NULL
         LIMIT 1),
        (SELECT 'GPU (not named in the Flight Recorder dumps)' FROM fr_entries
         WHERE run = $run AND coalesce(r.n_ranks, 0) = 0 AND backend = 'nccl'
         LIMIT 1)) AS device,
    coalesce(
        (SELECT list(DISTINCT host ORDER BY host) FROM ranks
         WHERE run = $run AND host IS NOT NULL),
        (SELECT list(DISTINCT host ORDER BY host) FROM nccl_processes
         WHERE run = $run AND host IS NOT NULL AND coalesce(r.n_ranks, 0) = 0),
        (SELECT list(DISTINCT host ORDER BY host) FROM nccl_sources
         WHERE run = $run AND host IS NOT NULL AND coalesce(r.n_ranks, 0) = 0)) AS hosts,
    (SELECT mode(timeline) FROM step_attribution WHERE run = $run) AS timeline,
    (SELECT host_source FROM run_nodes WHERE run = $run) AS host_source,
    (SELECT list(DISTINCT step_source ORDER BY step_source) FROM ranks
     WHERE run = $run AND step_source IS NOT NULL) AS step_sources,
    r.rank_subset
FROM runs r WHERE r.run = $run;
