-- Top GPU kernels of a run by time per step, with their spread over ranks.
-- Reads: gpu_ops, complete_steps. Parameters: $run, $limit.
-- Per rank: a kernel's time in the rank's complete steps (the complete_steps view, the
-- one definition) divided by their number
-- (ms per step); then mean, min, max and standard deviation over the ranks that ran it
-- (ranks that never ran it count as 0 ms).
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), n_steps AS (
    SELECT rank, count(*) AS n FROM complete GROUP BY rank
), per_rank AS (
    SELECT g.name, g.kind, g.rank, sum(g.end_ns - g.start_ns) / 1e6 / any_value(n.n) AS ms,
           count(*) / any_value(n.n) AS calls
    FROM gpu_ops g
    JOIN complete c ON c.rank = g.rank AND c.step = g.step
    JOIN n_steps n ON n.rank = g.rank
    WHERE g.run = $run
    GROUP BY g.name, g.kind, g.rank
), grid AS (
    -- every kernel on every rank that has complete steps (0 where it never ran)
    SELECT k.name, k.kind, n.rank, coalesce(p.ms, 0) AS ms, coalesce(p.calls, 0) AS calls
    FROM (SELECT DISTINCT name, kind FROM per_rank) k CROSS JOIN n_steps n
    LEFT JOIN per_rank p ON p.name = k.name AND p.kind = k.kind AND p.rank = n.rank
), stats AS (
    SELECT name, kind, avg(ms) AS mean_ms, min(ms) AS min_ms, max(ms) AS max_ms,
        coalesce(stddev_pop(ms), 0) AS std_ms, avg(calls) AS calls_per_step,
        -- ties (e.g. 0 on the ranks where it never ran): the lowest rank
        arg_max(rank, [ms, -rank]) AS slowest_rank, arg_min(rank, [ms, rank]) AS fastest_rank
    FROM grid GROUP BY name, kind
)
SELECT *, mean_ms / nullif(sum(mean_ms) OVER (), 0) AS share_of_gpu_time
FROM stats ORDER BY mean_ms DESC, name LIMIT $limit
