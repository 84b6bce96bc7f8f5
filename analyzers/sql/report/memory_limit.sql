-- Sets this connection's DuckDB memory limit (analyzers/_memory.py: the report's bound,
-- and the limit restored after it). Reads nothing; writes the setting only. Parameters:
-- $limit, a size such as '268435456B'.
SET memory_limit = $limit
