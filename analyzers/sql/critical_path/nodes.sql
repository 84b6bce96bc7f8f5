-- The critical-path graph's nodes (temporary table cp_nodes of critical_path/graph.sql),
-- in node order, with the collective instance each belongs to (-1: none) and the
-- instance's transfer time. Strings travel as codes (analyzers/cp_graph.py): cat is the
-- position in PATH_CATEGORIES, kind in NODE_KINDS; name_code numbers the names and
-- op_code the groups / launching ops (dense, in the order of critical_path/names.sql and
-- ops.sql; -1: no op). Reads cp_nodes, cp_member, cp_inst; writes nothing.
SELECT n.node, n.rank, n.step, n.stream, n.s, n.e,
    list_position(['compute', 'recompute', 'memory', 'collective', 'p2p'], n.cat) - 1
        AS cat,
    list_position(['kernel', 'coll', 'p2p'], n.kind) - 1 AS kind,
    n.launch_s, n.launch_e, coalesce(m.inst, -1) AS inst, coalesce(i.t_ns, 0) AS inst_t,
    dense_rank() OVER (ORDER BY n.name NULLS LAST) - 1 AS name_code,
    CASE WHEN n.op IS NULL THEN -1 ELSE dense_rank() OVER (ORDER BY n.op NULLS LAST) - 1 END
        AS op_code
FROM cp_nodes n
LEFT JOIN cp_member m USING (node)
LEFT JOIN cp_inst i USING (inst)
ORDER BY n.node;
