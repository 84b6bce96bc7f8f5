-- Whether the database holds anything besides stepscope's empty schema: a run, a row in
-- a table whose rows belong to runs (DuckDB's estimated_size), or a table stepscope does
-- not own. A failed ingest removes a database file it created only when this is false
-- (ingest/db_file.py). Reads runs, duckdb_tables(), stepscope_tables; writes nothing; no
-- parameters.
SELECT (SELECT count(*) FROM runs) > 0
    OR EXISTS (SELECT 1 FROM duckdb_tables() t
               LEFT JOIN stepscope_tables o ON o.table_name = t.table_name
               WHERE t.database_name = current_database() AND NOT t.temporary
                 AND (o.table_name IS NULL OR (o.per_run AND t.estimated_size > 0)))
