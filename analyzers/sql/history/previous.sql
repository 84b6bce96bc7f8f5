-- The latest earlier night of job $job before run $run (traces starting at or before
-- $start) whose traces are still in the database: the nightly baseline. Reads history,
-- runs; writes nothing. At most one row: run.
SELECT run FROM history
WHERE job = $job AND run <> $run AND trace_start <= $start
  AND run IN (SELECT run FROM runs)
ORDER BY trace_start DESC, ingested_at DESC, run DESC
LIMIT 1
