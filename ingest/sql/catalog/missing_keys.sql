-- The tables of a database stamped as stepscope's that exist without the primary key
-- stepscope gave them (schema_info, runs, ranks, history, stepscope_tables): a DuckDB file
-- of another application with tables named like ours. stepscope's writes replace rows by
-- those keys, so such a file is refused up front (ingest/schema.py classify) instead of
-- failing with a Binder Error mid-ingest. Reads duckdb_tables(), duckdb_constraints();
-- writes nothing; no parameters.
WITH keyed(table_name) AS (
    VALUES ('schema_info'), ('runs'), ('ranks'), ('history'), ('stepscope_tables')
)
SELECT list(t.table_name ORDER BY t.table_name) AS tables
FROM duckdb_tables() t JOIN keyed USING (table_name)
WHERE t.database_name = current_database() AND t.schema_name = 'main' AND NOT t.temporary
  AND NOT EXISTS (
      SELECT 1 FROM duckdb_constraints() c
      WHERE c.database_name = t.database_name AND c.schema_name = 'main'
        AND c.table_name = t.table_name AND c.constraint_type = 'PRIMARY KEY');
