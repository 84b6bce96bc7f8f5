-- Sets DuckDB's worker thread count (analyzers/_memory.py, release_freed_memory: one more
-- and back, which makes DuckDB return its allocator's free pages). Reads nothing; writes
-- the setting only. Parameters: $threads.
SET threads = $threads
