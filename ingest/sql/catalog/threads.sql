-- Sets this connection's DuckDB thread count (ingest.db.threads_limit: the writer appends
-- a batch of ranks on one thread). Reads nothing; writes the setting only. Parameters:
-- $threads, a positive integer.
SET threads = $threads
