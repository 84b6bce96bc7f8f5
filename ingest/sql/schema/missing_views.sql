-- The CREATE VIEW statements of the attached staging database `stg` whose views the current
-- database does not have yet (the analyzers' complete_steps, run_nodes, ...). Reads
-- duckdb_views(); writes nothing; no parameters.
SELECT s.sql FROM duckdb_views() s
WHERE s.database_name = 'stg' AND s.schema_name = 'main' AND NOT s.internal
  AND s.view_name NOT IN (SELECT view_name FROM duckdb_views()
                          WHERE database_name = current_database() AND schema_name = 'main')
