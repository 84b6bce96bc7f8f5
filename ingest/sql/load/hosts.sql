-- The host of every rank of run $run, where it came from and why a source was passed over
-- (ranks.host, ranks.host_source, ranks.host_note). The ONE place hosts are derived
-- (docs/attribution.md, "Hosts and nodes"). Candidates, best (lowest priority) first:
--   1 host_name   top-level `host_name` of the trace (set by the loader);
--   2 file_name   torch.profiler.tensorboard_trace_handler names files
--                 `{worker}.{ms}.pt.trace.json[.gz]` with the default worker `{hostname}_{pid}`;
--                 taken only when that pid is the trace's own (ranks.pid): a worker name
--                 the user chose (`worker0_step_12`) is not a host. Nor when the names
--                 give several hosts while every rank of the job uses its own GPU index of
--                 identical nodes with at least world-size GPUs (`rank3_4711`, one node);
--   3 trace_name  the same pattern in the top-level `traceName` (the handler's output path);
--   4 nccl_log    NCCL_DEBUG logs of the same job (nccl_processes: the process's rank in
--                 the largest communicator it joined);
--   5 inferred    launchers place consecutive ranks on a node, and `deviceProperties` lists
--                 the GPUs visible on the rank's node: node = rank // len(deviceProperties),
--                 named `node<k>`. Not used when a rank sees a single GPU of a multi-rank
--                 job (CUDA_VISIBLE_DEVICES narrowed per rank: the node size is unknown).
-- Reads ranks, nccl_processes; writes ranks.host, host_source, host_note. Parameter: $run.
UPDATE ranks SET host = best.host, host_source = best.source, host_note = best.note
FROM (
    WITH r AS (
        SELECT rank, host, host_source, source_file, trace_name, node_gpus, world_size, pid,
               device, device_name
        FROM ranks WHERE run = $run
    ), job AS (
        SELECT mode(node_gpus) AS node_gpus, coalesce(max(world_size), count(*)) AS world,
            -- every rank of the job on its own GPU index of identical nodes that each have
            -- at least world-size GPUs: the signature of one node
            count(*) >= coalesce(max(world_size), count(*)) AND count(*) > 1
                AND count(DISTINCT device) = count(*) AND count(DISTINCT node_gpus) = 1
                AND count(DISTINCT device_name) <= 1
                AND min(node_gpus) >= coalesce(max(world_size), count(*)) AS one_node
        FROM r
    ), names AS (
        -- {worker}.{ms}.pt.trace.json[.gz] of the file and of traceName, worker = host_pid,
        -- ms the epoch in milliseconds (a date or counter there is not the handler's name)
        SELECT rank, pid, src, base,
               regexp_extract(base, '^(.+)_(\d+)\.\d{10,}\.pt\.trace\.json(\.gz)?$',
                              ['host', 'pid']) AS w
        FROM (SELECT rank, pid, 'file_name' AS src,
                     regexp_extract(source_file, '([^/\\:]+)$', 1) AS base FROM r
              UNION ALL
              SELECT rank, pid, 'trace_name', regexp_extract(trace_name, '([^/\\:]+)$', 1)
              FROM r)
    ), pid_named AS (
        SELECT *, count(DISTINCT w.host) OVER (PARTITION BY src) AS n_hosts
        FROM names WHERE w.pid <> '' AND TRY_CAST(w.pid AS BIGINT) = pid
    ), candidates AS (
        SELECT rank, host, host_source AS source, 1 AS priority FROM r WHERE host IS NOT NULL
        UNION ALL
        SELECT n.rank, n.w.host, n.src, CASE WHEN n.src = 'file_name' THEN 2 ELSE 3 END
        FROM pid_named n, job j WHERE NOT (j.one_node AND n.n_hosts > 1)
        UNION ALL
        SELECT global_rank, host, 'nccl_log', 4 FROM nccl_processes
        WHERE run = $run AND global_rank IS NOT NULL
        UNION ALL
        SELECT r.rank, 'node' || (r.rank // j.node_gpus), 'inferred', 5
        FROM r, job j
        WHERE j.node_gpus > 1 OR (j.node_gpus = 1 AND j.world = 1)
    ), passed_over AS (
        -- why a tensorboard-style name was not taken as the host (first reason per rank)
        SELECT n.rank, arg_min(CASE
            WHEN TRY_CAST(n.w.pid AS BIGINT) IS DISTINCT FROM n.pid
                THEN format('{} ''{}'' ends in _{}, which is not the trace''s process id '
                            '({}): a chosen worker name, not {{hostname}}_{{pid}}; not taken '
                            'as the host', replace(n.src, '_', ' '), n.base, n.w.pid,
                            coalesce(CAST(n.pid AS VARCHAR), 'unknown'))
            ELSE format('{}s name {} hosts, but the {} ranks use distinct GPUs of identical '
                        '{}-GPU nodes, as on one node: the names were not taken as hosts',
                        replace(n.src, '_', ' '), p.n_hosts, j.world, j.node_gpus)
            END, n.src) AS note
        FROM names n CROSS JOIN job j
        LEFT JOIN pid_named p ON p.rank = n.rank AND p.src = n.src
        WHERE n.w.pid <> '' AND (p.rank IS NULL OR (j.one_node AND p.n_hosts > 1))
        GROUP BY n.rank
    )
    SELECT r.rank, arg_min(c.host, c.priority) AS host, arg_min(c.source, c.priority) AS source,
        CASE WHEN coalesce(min(c.priority), 9) > 1 THEN any_value(o.note) END AS note
    FROM r
    LEFT JOIN candidates c ON c.rank = r.rank AND c.host IS NOT NULL AND c.host <> ''
    LEFT JOIN passed_over o ON o.rank = r.rank
    GROUP BY r.rank
) best
WHERE ranks.run = $run AND ranks.rank = best.rank;
