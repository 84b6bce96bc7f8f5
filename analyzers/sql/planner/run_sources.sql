-- The paths given to `stepscope ingest` for run $run (runs.sources, a JSON list), where
-- the planner looks for the run's model.json, and the folder of the database file (a
-- relative source is also looked up from there: `ingest` ran beside its default
-- database). Reads runs, duckdb_databases(). Parameter: $run.
SELECT r.sources,
       (SELECT d.path FROM duckdb_databases() AS d
         WHERE d.database_name = current_database()) AS db_path
FROM runs AS r
WHERE r.run = $run;
