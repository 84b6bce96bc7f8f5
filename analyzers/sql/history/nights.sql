-- A job's nightly history, oldest first, with the change night over night.
-- Parameter: $job. `in_db`: the run's traces are still in the database (not pruned).
SELECT h.*,
    100 * (h.mfu - lag(h.mfu) OVER w) AS mfu_change_points,
    h.step_time_ms - lag(h.step_time_ms) OVER w AS step_time_change_ms,
    h.run IN (SELECT run FROM runs) AS in_db
FROM history h
WHERE h.job = $job
WINDOW w AS (ORDER BY h.trace_start, h.ingested_at, h.run)
ORDER BY h.trace_start, h.ingested_at, h.run
