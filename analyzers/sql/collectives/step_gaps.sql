-- Mean GPU idle between consecutive steps of run $run (ms). Reads steps.
-- Parameter: $run.
WITH s AS (
    SELECT rank, step, gpu_end_ns,
        lead(gpu_start_ns) OVER (PARTITION BY rank ORDER BY step) AS next_start,
        lead(step) OVER (PARTITION BY rank ORDER BY step) AS next_step
    FROM steps WHERE run = $run AND gpu_start_ns IS NOT NULL
)
SELECT avg(greatest(0, next_start - gpu_end_ns)) / 1e6 FROM s
WHERE next_step = step + 1;
