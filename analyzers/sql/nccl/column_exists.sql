-- Whether table $table has column $column (1 or 0). Reads duckdb_columns(); writes nothing.
-- Used to read databases written before a column existed.
SELECT count(*) AS n FROM duckdb_columns() WHERE table_name = $table AND column_name = $column
