-- The attributed columns of the run summary, one row per attributed run: the mean step
-- over ranks and complete steps, its compute share, and the largest loss (non-compute
-- category) with its share of the step, NULL when every loss is zero (not an arbitrary
-- zero). Reads step_attribution, complete_steps (views in
-- ingest/sql/schema/derived.sql); writes nothing. Parameter: $runs, a list of run names
-- (NULL = every run).
WITH attr_means AS (
    -- attributed step time: mean over ranks and complete steps, per category
    SELECT run, avg(step_ns) AS step_ns, avg(compute_ns) AS compute_ns,
        avg(recompute_ns) AS recompute, avg(exposed_comm_ns) AS exposed_comm,
        avg(straggler_wait_ns) AS straggler_wait, avg(bubble_ns) AS bubble,
        avg(memory_ns) AS memory, avg(idle_ns) AS idle
    FROM step_attribution JOIN complete_steps USING (run, rank, step)
    WHERE $runs IS NULL OR list_contains($runs, run)
    GROUP BY run
), attr AS (
    -- and the largest loss (non-compute category) with its share of the step
    SELECT run, any_value(step_ns) / 1e6 AS step_ms,
        any_value(compute_ns) / nullif(any_value(step_ns), 0) AS compute_share,
        arg_max(cat, [ns, -k]) FILTER (WHERE ns > 0) AS top_loss,  -- a tie: the first
        max(ns) FILTER (WHERE ns > 0) / nullif(any_value(step_ns), 0) AS top_loss_share
    FROM (
        SELECT run, step_ns, compute_ns,
            unnest(['recompute', 'exposed_comm', 'straggler_wait', 'bubble', 'memory',
                    'idle']) AS cat,
            unnest([recompute, exposed_comm, straggler_wait, bubble, memory, idle]) AS ns,
            unnest(range(6)) AS k
        FROM attr_means
    ) GROUP BY run
)
SELECT run, step_ms AS attributed_step_ms, compute_share, top_loss, top_loss_share
FROM attr;
