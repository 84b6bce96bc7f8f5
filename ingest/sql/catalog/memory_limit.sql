-- Sets this connection's DuckDB memory limit (ingest.db.fit_memory_limit: the writer's
-- limit sized to the attribution's largest batch of ranks). Reads nothing; writes the
-- setting only. Parameters: $limit, a size such as '268435456B'.
SET memory_limit = $limit
