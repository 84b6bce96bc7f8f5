-- This connection's DuckDB memory limit as a size DuckDB reads back (ingest.db.
-- fit_memory_limit restores it after the attribution). Reads the setting; writes nothing;
-- no parameters.
SELECT current_setting('memory_limit')
