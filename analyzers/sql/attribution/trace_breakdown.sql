-- Whole-trace GPU breakdown per rank, HTA's temporal-breakdown definitions (for
-- cross-checking): span = first GPU op start to last GPU op end; busy = union of all GPU
-- ops; compute = union of compute kernels (recompute included); idle = span - busy.
-- Union length: with intervals sorted by start, each adds max(0, end - max(start, the
-- largest end before it)). Parameters: $run; $hta_window: keep, like HTA's loader, only
-- GPU ops launched (by correlation) from a CPU call that starts before the last step.
WITH last_step AS (
    SELECT rank, max(start_ns) AS last_start FROM steps WHERE run = $run GROUP BY rank
), g AS (
    SELECT g.rank, g.start_ns AS s, g.end_ns AS e, g.kind = 'compute' AS is_compute
    FROM gpu_ops g
    LEFT JOIN cpu_ops l ON l.run = g.run AND l.rank = g.rank AND l.op_id = g.launch_op_id
    LEFT JOIN last_step ls ON ls.rank = g.rank
    WHERE g.run = $run
      AND (NOT $hta_window OR ls.last_start IS NULL OR l.start_ns < ls.last_start)
), all_ops AS (
    SELECT rank, s, e,
        max(e) OVER (PARTITION BY rank ORDER BY s, e
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM g
), compute_ops AS (
    SELECT rank, s, e,
        max(e) OVER (PARTITION BY rank ORDER BY s, e
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM g WHERE is_compute
), busy AS (
    SELECT rank, min(s) AS first_ns, max(e) AS last_ns,
        sum(greatest(0, e - greatest(s, coalesce(prev_end, s)))) AS busy_ns
    FROM all_ops GROUP BY rank
), comp AS (
    SELECT rank, sum(greatest(0, e - greatest(s, coalesce(prev_end, s)))) AS compute_ns
    FROM compute_ops GROUP BY rank
)
SELECT b.rank, b.last_ns - b.first_ns AS span_ns, CAST(b.busy_ns AS BIGINT) AS busy_ns,
    CAST(coalesce(c.compute_ns, 0) AS BIGINT) AS compute_ns,
    CAST(b.busy_ns - coalesce(c.compute_ns, 0) AS BIGINT) AS non_compute_ns,
    CAST(b.last_ns - b.first_ns - b.busy_ns AS BIGINT) AS idle_ns
FROM busy b LEFT JOIN comp c USING (rank)
ORDER BY b.rank;
