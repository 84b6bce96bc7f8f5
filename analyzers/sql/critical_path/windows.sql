-- The complete steps' windows of the critical-path graph (temporary table cp_windows of
-- critical_path/graph.sql) and the node that ends each (-1: none found). Reads
-- cp_windows; writes nothing.
SELECT rank, step, ws, we, has_successor, coalesce(probe, -1) AS probe
FROM cp_windows ORDER BY step, rank;
