-- The critical-path graph's edges (temporary table cp_edges of critical_path/graph.sql):
-- candidate causes of each node's start, the time t each allowed it, whether it is the
-- one that set the start, and for launches after a CPU wait how long the CPU waited.
-- kind is a code: the position in analyzers/critical_path/graph.py's EDGE_KINDS; ordered by dst
-- and the kind's name. Reads cp_edges; writes nothing.
SELECT coalesce(src, -1) AS src, dst,
    list_position(['stream', 'issue', 'consume', 'inferred', 'sync', 'launch'], kind) - 1
        AS kind,
    t, binding, coalesce(wait, 0) AS wait
FROM cp_edges ORDER BY dst, cp_edges.kind;
