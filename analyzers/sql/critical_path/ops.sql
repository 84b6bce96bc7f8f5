-- The groups (collectives) and launching CPU ops (kernels) of the critical-path graph's
-- nodes (temporary table cp_nodes of critical_path/graph.sql), one row per op_code of
-- critical_path/nodes.sql, in code order. Reads cp_nodes; writes nothing.
SELECT DISTINCT op FROM cp_nodes WHERE op IS NOT NULL ORDER BY op;
