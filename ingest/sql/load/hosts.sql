-- The host of every rank of run $run and where it came from (ranks.host, ranks.host_source).
-- The ONE place hosts are derived (docs/attribution.md, "Hosts and nodes"). Candidates, best
-- (lowest priority number) first:
--   1 host_name   top-level `host_name` of the trace (set by the loader);
--   2 file_name   torch.profiler.tensorboard_trace_handler names files
--                 `{worker}.{ms}.pt.trace.json[.gz]` with the default worker `{hostname}_{pid}`;
--   3 trace_name  the same pattern in the top-level `traceName` (the handler's output path);
--   4 nccl_log    NCCL_DEBUG logs of the same job (nccl_processes: the process's rank in
--                 the largest communicator it joined);
--   5 inferred    launchers place consecutive ranks on a node, and `deviceProperties` lists
--                 the GPUs visible on the rank's node: node = rank // len(deviceProperties),
--                 named `node<k>`. Not used when a rank sees a single GPU of a multi-rank
--                 job (CUDA_VISIBLE_DEVICES narrowed per rank: the node size is unknown).
UPDATE ranks SET host = best.host, host_source = best.source
FROM (
    WITH r AS (
        SELECT rank, host, host_source, source_file, trace_name, node_gpus, world_size
        FROM ranks WHERE run = $run
    ), job AS (
        SELECT mode(node_gpus) AS node_gpus, coalesce(max(world_size), count(*)) AS world
        FROM r
    ), candidates AS (
        SELECT rank, host, host_source AS source, 1 AS priority FROM r WHERE host IS NOT NULL
        UNION ALL
        SELECT rank, regexp_extract(regexp_extract(source_file, '([^/\\:]+)$', 1),
                                    '^(.+)_\d+\.\d+\.pt\.trace\.json(\.gz)?$', 1), 'file_name', 2
        FROM r
        UNION ALL
        SELECT rank, regexp_extract(regexp_extract(trace_name, '([^/\\:]+)$', 1),
                                    '^(.+)_\d+\.\d+\.pt\.trace\.json(\.gz)?$', 1), 'trace_name', 3
        FROM r
        UNION ALL
        SELECT global_rank, host, 'nccl_log', 4 FROM nccl_processes
        WHERE run = $run AND global_rank IS NOT NULL
        UNION ALL
        SELECT r.rank, 'node' || (r.rank // j.node_gpus), 'inferred', 5
        FROM r, job j
        WHERE j.node_gpus > 1 OR (j.node_gpus = 1 AND j.world = 1)
    )
    SELECT rank, arg_min(host, priority) AS host, arg_min(source, priority) AS source
    FROM candidates WHERE host IS NOT NULL AND host <> ''
    GROUP BY rank
) best
WHERE ranks.run = $run AND ranks.rank = best.rank;
