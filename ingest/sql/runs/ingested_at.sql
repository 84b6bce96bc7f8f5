-- When run $run was ingested (NULL rows: the database does not hold it); asked before a
-- re-ingest replaces it, so that the replacement can be announced. Reads runs.
SELECT ingested_at FROM runs WHERE run = $run
