-- Puts this connection's DuckDB memory limit back to DuckDB's default (analyzers/_memory.py,
-- when the limit before a bound was the default). Reads nothing; writes the setting
-- only; no parameters.
RESET memory_limit
