-- Per rank: mean over its complete steps (the complete_steps view) of the step time and
-- of each category and of the idle split (NULL in databases written before it), in ms.
-- Parameter: $run.
WITH pick AS (
    SELECT a.* FROM step_attribution a JOIN complete_steps USING (run, rank, step)
    WHERE a.run = $run
)
SELECT p.rank, r.host, count(*) AS n_steps,
    avg(step_ns) / 1e6 AS step_time_ms,
    avg(compute_ns) / 1e6 AS compute, avg(recompute_ns) / 1e6 AS recompute,
    avg(exposed_comm_ns) / 1e6 AS exposed_comm, avg(straggler_wait_ns) / 1e6 AS straggler_wait,
    avg(bubble_ns) / 1e6 AS bubble, avg(memory_ns) / 1e6 AS memory, avg(idle_ns) / 1e6 AS idle,
    avg(idle_host_ns) / 1e6 AS idle_host, avg(idle_launch_ns) / 1e6 AS idle_launch,
    avg(idle_other_ns) / 1e6 AS idle_other
FROM pick p LEFT JOIN ranks r ON r.run = $run AND r.rank = p.rank
GROUP BY p.rank, r.host ORDER BY p.rank;
