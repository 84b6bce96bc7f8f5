-- This connection's DuckDB thread count (ingest.db.threads_limit restores it after the
-- appends). Reads the setting; writes nothing; no parameters.
SELECT current_setting('threads')
