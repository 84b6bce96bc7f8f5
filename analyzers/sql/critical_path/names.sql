-- The names of the critical-path graph's nodes (temporary table cp_nodes of
-- critical_path/graph.sql), one row per name_code of critical_path/nodes.sql, in code
-- order. Reads cp_nodes; writes nothing.
SELECT DISTINCT name FROM cp_nodes ORDER BY name NULLS LAST;
