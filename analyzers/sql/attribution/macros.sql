-- The attribution's shared definitions, as temporary macros (analyzers._sql.install_macros;
-- allowed on read-only connections). Used by attribution/attribution.sql (at ingest) and
-- detail/timeline.sql (the dashboard's Timeline), so both attribute CPU time alike.

-- cpu_self_time(run_name, windows): on CPU-only ranks, the self time of each compute op of
-- run `run_name` (its interval minus its children's), so that the op actually running
-- decides the category (docs/attribution.md). Annotations and Python frames are
-- transparent; communication calls, waits and ProfilerStep spans are not compute.
-- `windows` is a list of {rank, ws, we}: the ranks to read and, per rank, the window whose
-- overlapping ops are read (ws NULL: every op of the rank); callers clip to their window.
-- One row per gap: rank, s, e (ns), cat (2 recompute when the op is in recompute_ops, else
-- 1 compute). Reads cpu_ops and recompute_ops. The CTE names are prefixed so that an
-- argument's subquery can name its own CTEs (`win`) without being captured.
CREATE OR REPLACE TEMP MACRO cpu_self_time(run_name, windows) AS TABLE
WITH self_win AS (
    SELECT unnest(windows, recursive := true)
), self_ops AS (
    SELECT o.rank, o.op_id, o.parent_id, o.start_ns, o.end_ns, o.category, o.name
    FROM cpu_ops o JOIN self_win w ON w.rank = o.rank
    WHERE o.run = run_name AND (w.ws IS NULL OR (o.end_ns > w.ws AND o.start_ns < w.we))
), self_kids AS (
    SELECT c.rank, c.parent_id AS op_id, c.start_ns, c.end_ns,
        lag(c.end_ns) OVER (PARTITION BY c.rank, c.parent_id ORDER BY c.start_ns, c.op_id)
            AS prev_end
    FROM self_ops c WHERE c.parent_id IS NOT NULL
), self_gaps AS (
    -- before each child: from the previous child's end (or the parent's start)
    SELECT k.rank, k.op_id, coalesce(greatest(k.prev_end, p.start_ns), p.start_ns) AS s,
           k.start_ns AS e
    FROM self_kids k JOIN self_ops p ON p.rank = k.rank AND p.op_id = k.op_id
    UNION ALL
    -- after the last child
    SELECT p.rank, p.op_id, max(k.end_ns), p.end_ns
    FROM self_kids k JOIN self_ops p ON p.rank = k.rank AND p.op_id = k.op_id
    GROUP BY p.rank, p.op_id, p.end_ns
    UNION ALL
    -- ops without children
    SELECT p.rank, p.op_id, p.start_ns, p.end_ns FROM self_ops p
    WHERE NOT EXISTS (SELECT 1 FROM self_ops k WHERE k.rank = p.rank AND k.parent_id = p.op_id)
)
SELECT g.rank, g.s, g.e, CASE WHEN rc.op_id IS NOT NULL THEN 2 ELSE 1 END AS cat
FROM self_gaps g
JOIN self_ops o ON o.rank = g.rank AND o.op_id = g.op_id
LEFT JOIN recompute_ops rc ON rc.run = run_name AND rc.rank = g.rank AND rc.op_id = g.op_id
WHERE g.e > g.s
  AND o.category IN ('cpu_op', 'Operator')
  AND o.name NOT LIKE 'c10d::%' AND o.name NOT LIKE '_c10d_functional::%'
  AND o.name NOT LIKE 'record_param_comms' AND o.name NOT LIKE '%wait%'
  AND o.name NOT LIKE 'ProfilerStep#%';
