-- What the current database holds, before stepscope reads or writes it (ingest/schema.py):
-- n_objects, its own tables and views in any schema (0: a new, empty file); has_info,
-- whether it has the table main.schema_info with the columns key and value (then
-- catalog/version.sql reads its version). Reads duckdb_tables(), duckdb_views(),
-- duckdb_columns(); writes nothing; no parameters.
SELECT
    (SELECT count(*) FROM duckdb_tables()
     WHERE database_name = current_database() AND NOT temporary)
    + (SELECT count(*) FROM duckdb_views()
       WHERE database_name = current_database() AND NOT temporary AND NOT internal)
        AS n_objects,
    (SELECT count(*) = 2 FROM duckdb_columns()
     WHERE database_name = current_database() AND schema_name = 'main'
       AND table_name = 'schema_info' AND column_name IN ('key', 'value')) AS has_info,
    (SELECT list(table_name ORDER BY table_name) FROM duckdb_tables()
     WHERE database_name = current_database() AND NOT temporary) AS tables
