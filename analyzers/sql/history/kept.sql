-- The nights of job $job whose traces are still in the database, newest first (`--keep N`
-- prunes all but the first N). Reads history, runs; writes nothing.
SELECT run FROM history
WHERE job = $job AND run IN (SELECT run FROM runs)
ORDER BY trace_start DESC, ingested_at DESC, run DESC
