-- Every run with when it was ingested (text), newest first: the dashboard's cache keys (a
-- re-ingested run gets a new token). Reads runs; writes nothing; no parameters.
SELECT run, CAST(ingested_at AS VARCHAR) AS token FROM runs
ORDER BY ingested_at DESC, run
