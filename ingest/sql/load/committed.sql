-- Whether this very ingest of run $run reached the database (after Ctrl-C): 1 when the
-- runs row with its timestamp $t exists, else 0. Reads runs; writes nothing.
-- Parameters: $run, $t.
SELECT count(*) AS n FROM runs WHERE run = $run AND ingested_at = $t
