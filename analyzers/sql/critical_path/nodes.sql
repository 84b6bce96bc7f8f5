-- The critical-path graph's nodes of one batch of ranks (temporary table cp_nodes of
-- critical_path/graph.sql), in node order. Strings travel as codes (analyzers/critical_path/graph.py):
-- cat is the position in PATH_CATEGORIES, kind in NODE_KINDS; name_code numbers the
-- batch's names and op_code its groups / launching ops (dense, in the order of
-- critical_path/names.sql and ops.sql over the same batch; -1: no op), which cp_graph.py
-- maps to the run's codes. Reads cp_nodes; writes nothing.
SELECT n.node, n.rank, n.step, n.s, n.e,
    list_position(['compute', 'recompute', 'memory', 'collective', 'p2p'], n.cat) - 1
        AS cat,
    list_position(['kernel', 'coll', 'p2p'], n.kind) - 1 AS kind,
    n.launch_s, n.launch_e,
    dense_rank() OVER (ORDER BY n.name NULLS LAST) - 1 AS name_code,
    CASE WHEN n.op IS NULL THEN -1 ELSE dense_rank() OVER (ORDER BY n.op NULLS LAST) - 1 END
        AS op_code
FROM cp_nodes n
ORDER BY n.node;
