-- The critical-path graph's nodes (temporary table cp_nodes of critical_path/graph.sql),
-- in node order, with the collective instance each belongs to (-1: none) and the
-- instance's transfer time; name_code numbers the names (dense, by name). Reads cp_nodes, cp_member, cp_inst; writes nothing.
SELECT n.node, n.rank, n.step, n.stream, n.s, n.e, n.cat, n.kind, n.name, n.op,
    n.launch_s, coalesce(m.inst, -1) AS inst, coalesce(i.t_ns, 0) AS inst_t,
    dense_rank() OVER (ORDER BY n.name) - 1 AS name_code
FROM cp_nodes n
LEFT JOIN cp_member m USING (node)
LEFT JOIN cp_inst i USING (inst)
ORDER BY n.node;
