-- The names of the database's own (not temporary) tables. Reads duckdb_tables(); writes
-- nothing; no parameters. Used to open databases written before a table existed.
SELECT table_name FROM duckdb_tables() WHERE NOT temporary
