-- The tables with a `run` column in database $db (NULL: the current one), by name: what a
-- merge copies and a delete clears. The nightly `history` is left out: it outlives
-- re-ingests and deleted runs (as in ingest/loader.py). Reads duckdb_columns(),
-- duckdb_tables(); writes nothing.
SELECT DISTINCT c.table_name FROM duckdb_columns() c
JOIN duckdb_tables() t ON t.table_name = c.table_name AND t.schema_name = c.schema_name
                      AND t.database_name = c.database_name
WHERE c.column_name = 'run' AND NOT c.internal AND c.schema_name = 'main'
  AND c.database_name = coalesce($db, current_database())
  AND c.table_name <> 'history'
ORDER BY c.table_name
