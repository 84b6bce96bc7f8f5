-- The names of the tables of the database (temporary ones too). Reads duckdb_tables();
-- writes nothing; no parameters. Used to tell databases from before a table existed.
SELECT table_name FROM duckdb_tables()
