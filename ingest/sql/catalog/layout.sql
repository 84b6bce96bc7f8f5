-- The layout of the current database as data: every table's columns in order
-- (kind 'table': name, column_name, data_type, position) and every view's definition
-- (kind 'view': name, definition). Read from a scratch database built by the migrations,
-- it is what catalog/compat_views.sql compares an older file with. Reads duckdb_columns(),
-- duckdb_views(); writes nothing; no parameters.
SELECT 'table' AS kind, table_name AS name, column_name, data_type, column_index AS position,
       NULL AS definition
FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
UNION ALL
SELECT 'view', view_name, NULL, NULL, NULL, sql FROM duckdb_views()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
  AND NOT temporary
ORDER BY kind, name, position
