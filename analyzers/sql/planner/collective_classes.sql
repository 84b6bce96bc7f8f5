-- Collective calls of run $run grouped into classes of one collective, process group
-- label, group size and message size, per rank and complete step (over every rank of
-- the run, like collectives/stats.sql): calls, time, transfer time (d_min, the
-- instance's duration without waiting for late ranks; docs/attribution.md), the time
-- attributed to exposed_comm (as each collective claims it in full: exposed_claim_ns, so
-- the planner can charge time shared by two classes to the one the compute waits for),
-- straggler_wait and bubble, and whether the group crosses nodes. The planner scales each class to another layout (analyzers/plan/calibrate.py).
-- Reads collectives, collective_waits, collective_exposure, process_groups, ranks,
-- run_nodes, complete_steps and the collectives' macros (collectives/macros.sql).
-- Parameter: $run.
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), rank_steps AS (
    SELECT count(*) AS n FROM complete
), node AS (
    SELECT gpus_per_node FROM run_nodes WHERE run = $run
), calls AS (
    SELECT c.collective, c.is_p2p, coalesce(c.group_size, 1) AS group_size,
        -- the label of collectives/stats.sql, so each class finds its role there
        group_label(c.pg_desc, c.source, c.library, c.comm_op, c.group_size) AS group_label,
        crosses_nodes(gh.hosts, c.group_size, (SELECT gpus_per_node FROM node)) AS crosses_nodes,
        greatest(coalesce(c.in_bytes, 0), coalesce(c.out_bytes, 0)) AS nbytes,
        c.work_end_ns - c.work_start_ns AS dur_ns,
        coalesce(w.min_dur_ns, c.work_end_ns - c.work_start_ns) AS transfer_ns,
        coalesce(e.exposed_ns, 0) AS exposed_ns,
        coalesce(e.straggler_wait_ns, 0) AS wait_ns,
        coalesce(e.bubble_ns, 0) AS bubble_ns
    FROM collectives c
    JOIN complete s ON s.rank = c.rank AND s.step = c.step
    LEFT JOIN group_hosts($run) gh ON gh.pg_name = c.pg_name
    LEFT JOIN collective_waits w ON w.run = c.run AND w.rank = c.rank AND w.coll_id = c.coll_id
    LEFT JOIN (SELECT rank, coll_id, sum(coalesce(exposed_claim_ns, exposed_ns)) AS exposed_ns,
                      sum(straggler_wait_ns ORDER BY straggler_wait_ns) AS straggler_wait_ns, sum(bubble_ns ORDER BY bubble_ns) AS bubble_ns
               FROM collective_exposure WHERE run = $run GROUP BY rank, coll_id) e
           ON e.rank = c.rank AND e.coll_id = c.coll_id
    WHERE c.run = $run AND c.work_start_ns IS NOT NULL
)
SELECT collective, group_label, group_size, nbytes, bool_or(crosses_nodes) AS crosses_nodes,
    bool_or(is_p2p) AS is_p2p,
    count(*) / any_value(rs.n) AS calls_per_step,
    sum(dur_ns) / any_value(rs.n) / 1e6 AS time_ms,
    sum(transfer_ns) / any_value(rs.n) / 1e6 AS transfer_ms,
    sum(exposed_ns ORDER BY exposed_ns) / any_value(rs.n) / 1e6 AS exposed_ms,
    sum(wait_ns ORDER BY wait_ns) / any_value(rs.n) / 1e6 AS wait_ms,
    sum(bubble_ns ORDER BY bubble_ns) / any_value(rs.n) / 1e6 AS bubble_ms,
    median(transfer_ns) / 1e3 AS median_transfer_us
FROM calls CROSS JOIN rank_steps rs
GROUP BY collective, group_label, group_size, nbytes
ORDER BY transfer_ms DESC, collective, group_label, nbytes;
