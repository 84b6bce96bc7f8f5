-- Per step: mean over ranks of each category, in ms. Parameter: $run.
SELECT step, bool_and(c.step IS NOT NULL) AS complete, count(*) AS n_ranks,
    avg(step_ns) / 1e6 AS step_time_ms,
    avg(compute_ns) / 1e6 AS compute, avg(recompute_ns) / 1e6 AS recompute,
    avg(exposed_comm_ns) / 1e6 AS exposed_comm, avg(straggler_wait_ns) / 1e6 AS straggler_wait,
    avg(bubble_ns) / 1e6 AS bubble, avg(memory_ns) / 1e6 AS memory, avg(idle_ns) / 1e6 AS idle
FROM step_attribution a LEFT JOIN complete_steps c USING (run, rank, step)
WHERE a.run = $run
GROUP BY step ORDER BY step;
