-- The critical-path graph's edges (temporary table cp_edges of critical_path/graph.sql):
-- candidate causes of each node's start, the time t each allowed it, whether it is the
-- one that set the start, and for launches after a CPU wait how long the CPU waited.
-- Reads cp_edges; writes nothing.
SELECT coalesce(src, -1) AS src, dst, kind, t, binding, coalesce(wait, 0) AS wait
FROM cp_edges ORDER BY dst, kind;
