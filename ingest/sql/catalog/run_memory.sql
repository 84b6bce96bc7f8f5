-- What this connection's DuckDB holds in memory for tables not yet in the database file:
-- the uncommitted run's transaction-local rows (DuckDB's IN_MEMORY_TABLE buffers: 14 MB
-- after the appends of 1,024 simulated ranks under a 32 MiB limit, the rest spilled),
-- which the commit must pin, so the writer's memory limit is set as working room on top
-- of them (ingest.db.fit_memory_limit).
-- Reads duckdb_memory(); writes nothing; no parameters.
SELECT CAST(coalesce(sum(memory_usage_bytes), 0) AS BIGINT)
FROM duckdb_memory()
WHERE tag = 'IN_MEMORY_TABLE'
