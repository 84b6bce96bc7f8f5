-- DuckDB's worker thread count (analyzers/_memory.py, release_freed_memory). Reads
-- nothing; writes nothing.
SELECT current_setting('threads')
