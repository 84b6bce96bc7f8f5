-- Model, recompute and extra hardware FLOPs per step of run $run, summed over ranks
-- (mean over each rank's complete steps), the number of counted ops and the number of
-- ranks summed over (those with a complete step). Reads the
-- model_flops macro (mfu/flops.sql) and complete_steps. Parameters: $run, $max_rate
-- (mfu/flops.sql).
WITH f AS (SELECT * FROM model_flops($run, $max_rate)),
complete AS (SELECT rank, step FROM complete_steps WHERE run = $run),
per_rank AS (
    SELECT c.rank, count(DISTINCT c.step) AS n_steps,
        coalesce(sum(f.model_flops) FILTER (WHERE NOT f.is_recompute), 0) AS model,
        coalesce(sum(f.model_flops) FILTER (WHERE f.is_recompute), 0) AS recompute,
        coalesce(sum(f.hardware_extra), 0) AS extra,
        count(f.op_id) AS n_ops
    FROM complete c LEFT JOIN f ON f.rank = c.rank AND f.step = c.step
    GROUP BY c.rank
)
SELECT sum(model / n_steps), sum(recompute / n_steps), sum(extra / n_steps), sum(n_ops),
    count(*) AS n_ranks
FROM per_rank;
