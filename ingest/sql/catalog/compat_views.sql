-- Reading an older database read-only (docs/schema.md, "Versions and migrations"): the
-- statements that make it look like the current schema in this connection only, as
-- temporary views that shadow its tables. A table missing columns becomes a view of it
-- with those columns NULL (of their type); a missing table an empty view; every view of
-- the current schema is created again over them. Nothing is written to the file.
-- Parameter $layout: catalog/layout.sql's rows of a database at the current version, as
-- a list of structs. Reads duckdb_columns(), duckdb_tables(); returns one statement per
-- row (`stmt`), tables first; writes nothing itself.
WITH want AS (
    SELECT unnest($layout, recursive := true)
), have AS (
    SELECT table_name AS name, column_name FROM duckdb_columns()
    WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
), have_tables AS (
    SELECT DISTINCT name FROM have
), cols AS (
    SELECT w.name, w.position, h.column_name IS NULL AS missing,
        '"' || replace(w.column_name, '"', '""') || '"' AS q_col, w.data_type
    FROM want w LEFT JOIN have h ON h.name = w.name AND h.column_name = w.column_name
    WHERE w.kind = 'table'
), shadowed AS (
    SELECT c.name,
        'CREATE OR REPLACE TEMP VIEW "' || replace(c.name, '"', '""') || '" AS SELECT '
        || string_agg(CASE WHEN c.missing THEN 'CAST(NULL AS ' || c.data_type || ') AS ' || c.q_col
                           ELSE c.q_col END, ', ' ORDER BY c.position)
        || CASE WHEN t.name IS NULL THEN ' WHERE false'
                ELSE ' FROM "' || replace(current_database(), '"', '""') || '".main."'
                     || replace(c.name, '"', '""') || '"' END AS stmt
    FROM cols c LEFT JOIN have_tables t ON t.name = c.name
    GROUP BY c.name, t.name
    HAVING bool_or(c.missing)
)
SELECT stmt FROM (
    SELECT 0 AS k, name, stmt FROM shadowed
    UNION ALL
    SELECT 1, name, regexp_replace(definition, '^CREATE VIEW', 'CREATE OR REPLACE TEMP VIEW')
    FROM want WHERE kind = 'view'
)
ORDER BY k, name
