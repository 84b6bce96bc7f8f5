-- The profiler's settings of run $run (docs/schema.md, `ranks.profiler_config`): per
-- setting, how many of the run's ranks record it on (1), beside the number of ranks; and
-- the CUDA/HIP graph launches of its ranks (their kernels ran from a graph, whose ops the
-- profiler does not record). Reads ranks and cpu_ops. Parameter: $run.
SELECT
    count(*) AS ranks,
    count(*) FILTER (WHERE profiler_config ->> 'record_shapes' = '1') AS record_shapes,
    count(*) FILTER (WHERE profiler_config ->> 'profile_memory' = '1') AS profile_memory,
    (SELECT count(*) FROM cpu_ops
     WHERE run = $run AND category IN ('cuda_runtime', 'Runtime')
       AND regexp_matches(name, '^(cuda|hip)GraphLaunch')) AS graph_launches
FROM ranks WHERE run = $run;
