-- The identity of run $run for the report's `run` section: status, world size, ranks
-- ingested, failed files, the most common device name, hosts, timeline, host source
-- and step sources, and the `--ranks` subset. Reads runs, ranks, step_attribution,
-- run_nodes. Parameter: $run.
SELECT r.run, r.status, r.world_size, r.n_ranks, r.failed_files,
    (SELECT mode(coalesce(nullif(trim(device_name), ''), CASE WHEN device IS NULL THEN 'CPU only'
                                            ELSE 'GPU (unnamed)' END))
     FROM ranks WHERE run = $run) AS device,
    (SELECT list(DISTINCT host ORDER BY host) FROM ranks WHERE run = $run AND host IS NOT NULL)
        AS hosts,
    (SELECT mode(timeline) FROM step_attribution WHERE run = $run) AS timeline,
    (SELECT host_source FROM run_nodes WHERE run = $run) AS host_source,
    (SELECT list(DISTINCT step_source ORDER BY step_source) FROM ranks
     WHERE run = $run AND step_source IS NOT NULL) AS step_sources,
    r.rank_subset
FROM runs r WHERE r.run = $run;
