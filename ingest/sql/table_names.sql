-- The names of the database's tables. Reads duckdb_tables(); writes nothing; no parameters.
SELECT table_name FROM duckdb_tables()
