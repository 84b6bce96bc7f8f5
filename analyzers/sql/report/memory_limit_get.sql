-- This connection's DuckDB memory limit as a size DuckDB reads back (analyzers/_memory.py
-- restores it after a bounded part of the report). Reads the setting; writes nothing; no
-- parameters.
SELECT current_setting('memory_limit')
