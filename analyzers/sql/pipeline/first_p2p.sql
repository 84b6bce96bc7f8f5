-- The first point-to-point op of each rank in each complete step (a first pipeline
-- stage starts a step by sending, the others by receiving). Parameter: $run.
SELECT c.rank, c.step, arg_min(c.collective, coalesce(c.cpu_start_ns, c.work_start_ns)) AS first_op
FROM collectives c
JOIN complete_steps s ON s.run = c.run AND s.rank = c.rank AND s.step = c.step
WHERE c.run = $run AND c.is_p2p
GROUP BY c.rank, c.step;
