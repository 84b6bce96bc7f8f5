-- Per collective type and process-group kind of run $run, over complete steps, per rank
-- and step: calls, bytes, time and where it went, and the achieved bus bandwidth.
-- Where the time went (collective_exposure, inside the complete steps' windows): exposed
-- (exposed_comm), straggler wait, bubble (point-to-point ops) and overlapped (the rest:
-- under compute or under another collective); the first three summed over every row are
-- the run's categories, and the four add up to time_ms, the collective's time inside
-- those windows. Kernels of
-- the communication-kernel table without a process group are grouped by library and op
-- ('deepep dispatch'), with the role the table gives.
-- Bus bandwidth (nccl-tests convention) = bytes x factor / transfer time, factor
-- 2(n-1)/n for all_reduce, (n-1)/n for all_gather / reduce_scatter / all_to_all, 1 for
-- broadcast and reduce (none for send/recv, whose time includes the wait for the
-- peer); the transfer time is d_min (the instance's duration
-- without waiting for late ranks); bytes: the larger of input and output.
-- Reads collectives, collective_waits, collective_exposure, complete_steps,
-- step_attribution, process_groups, ranks, run_nodes and the collectives' macros
-- (collectives/macros.sql). Parameter: $run.
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), rank_steps AS (
    SELECT count(*) AS n FROM complete
), node AS (
    SELECT gpus_per_node FROM run_nodes WHERE run = $run
), calls AS (
    SELECT c.rank, c.coll_id, c.collective, c.is_p2p, c.group_size,
        group_label(c.pg_desc, c.source, c.library, c.comm_op, c.group_size) AS group_label,
        coalesce(c.library, CASE WHEN c.source = 'gloo' THEN 'gloo' ELSE 'nccl' END) AS library,
        c.comm_op, c.comm_role,
        -- on more than one host, or larger than one node's GPUs whatever the names say;
        -- a kernel whose library names it internode (DeepEP's internode / internode_ll
        -- dispatch, combine, notify: RDMA between nodes) crosses them by definition
        crosses_nodes(gh.hosts, c.group_size, (SELECT gpus_per_node FROM node))
            OR coalesce(c.source = 'comm_kernel'
                        AND regexp_matches(c.kernel_name, '::internode(?:_ll)?::'), false)
            AS crosses_nodes,
        greatest(coalesce(c.in_bytes, 0), coalesce(c.out_bytes, 0)) AS nbytes,
        c.in_bytes IS NOT NULL OR c.out_bytes IS NOT NULL AS sized,
        c.work_end_ns - c.work_start_ns AS dur_ns,
        w.min_dur_ns,
        s.step IS NOT NULL AS in_complete_step
    FROM collectives c
    LEFT JOIN complete s ON s.rank = c.rank AND s.step = c.step
    LEFT JOIN group_hosts($run) gh ON gh.pg_name = c.pg_name
    LEFT JOIN collective_waits w ON w.run = c.run AND w.rank = c.rank AND w.coll_id = c.coll_id
    WHERE c.run = $run AND c.work_start_ns IS NOT NULL
), windows AS (
    SELECT a.rank, a.window_start_ns AS ws, a.window_end_ns AS we
    FROM step_attribution a JOIN complete s ON s.rank = a.rank AND s.step = a.step
    WHERE a.run = $run
), inside AS (
    -- each collective's time inside the complete steps' windows
    SELECT c.rank, c.coll_id,
        sum(least(c.work_end_ns, w.we) - greatest(c.work_start_ns, w.ws)) AS ns
    FROM collectives c
    JOIN windows w ON w.rank = c.rank AND c.work_start_ns < w.we AND c.work_end_ns > w.ws
    WHERE c.run = $run GROUP BY c.rank, c.coll_id
), exposure AS (
    SELECT e.rank, e.coll_id, sum(e.exposed_ns) AS exposed_ns,
        sum(e.straggler_wait_ns) AS wait_ns, sum(e.bubble_ns) AS bubble_ns
    FROM collective_exposure e JOIN complete s ON s.rank = e.rank AND s.step = e.step
    WHERE e.run = $run GROUP BY e.rank, e.coll_id
), timed AS (
    SELECT calls.*, coalesce(i.ns, 0) AS inside_ns, coalesce(x.exposed_ns, 0) AS exposed_ns,
        coalesce(x.wait_ns, 0) AS wait_ns, coalesce(x.bubble_ns, 0) AS bubble_ns
    FROM calls
    LEFT JOIN inside i ON i.rank = calls.rank AND i.coll_id = calls.coll_id
    LEFT JOIN exposure x ON x.rank = calls.rank AND x.coll_id = calls.coll_id
    WHERE calls.in_complete_step OR i.ns IS NOT NULL
)
SELECT collective, group_label, bool_or(crosses_nodes) AS crosses_nodes,
    max(group_size) AS group_size,
    count(*) FILTER (WHERE in_complete_step) / any_value(rs.n) AS calls_per_step,
    -- unknown (NULL) when calls ran in complete steps and none of them has a size
    -- (kernels of the communication-kernel table such as DeepEP's record none)
    CASE WHEN count(*) FILTER (WHERE in_complete_step) > 0
              AND NOT coalesce(bool_or(sized) FILTER (WHERE in_complete_step), false)
         THEN NULL
         ELSE coalesce(sum(nbytes) FILTER (WHERE in_complete_step), 0) / any_value(rs.n)
    END AS bytes_per_step,
    sum(inside_ns) / any_value(rs.n) / 1e6 AS time_ms,
    sum(exposed_ns) / any_value(rs.n) / 1e6 AS exposed_ms,
    sum(wait_ns) / any_value(rs.n) / 1e6 AS straggler_wait_ms,
    sum(bubble_ns) / any_value(rs.n) / 1e6 AS bubble_ms,
    greatest(sum(inside_ns - exposed_ns - wait_ns - bubble_ns), 0) / any_value(rs.n) / 1e6
        AS overlapped_ms,
    median(CASE WHEN is_p2p OR NOT in_complete_step THEN NULL
        ELSE nbytes * bus_factor(collective, group_size)
             / nullif(coalesce(min_dur_ns, dur_ns), 0) END) AS bus_bw_gbs,
    bool_or(is_p2p) AS is_p2p,
    min(library) AS library, min(comm_op) AS comm_op, min(comm_role) AS comm_role
FROM timed CROSS JOIN rank_steps rs
GROUP BY collective, group_label
HAVING count(*) FILTER (WHERE in_complete_step) > 0 OR sum(inside_ns) > 0
ORDER BY exposed_ms + straggler_wait_ms + bubble_ms DESC, time_ms DESC;
