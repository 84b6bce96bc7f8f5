-- The tables stepscope owns whose rows belong to one run (stepscope_tables.per_run), that
-- the current database has: what a re-ingest, a merge, `delete` and `nightly --keep`
-- replace or delete, and nothing else (a user's own table with a `run` column is not
-- listed). Reads stepscope_tables, duckdb_tables(); writes nothing; no parameters.
SELECT o.table_name FROM stepscope_tables o
JOIN duckdb_tables() t ON t.table_name = o.table_name AND t.schema_name = 'main'
                      AND t.database_name = current_database() AND NOT t.temporary
WHERE o.per_run
ORDER BY o.table_name
