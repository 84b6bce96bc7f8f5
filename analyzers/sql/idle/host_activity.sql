-- What the host ran while the GPU waited for it in run $run: self time per name
-- (the step annotation's own time folded into one) and thread (its role in the thread name, `python3` of
-- `thread 542 (python3)`, so that ranks add up) over the complete steps, in ms per rank
-- and step, largest first, at most $limit rows; `kind` classifies the name for the advisor.
-- Reads complete_steps, host_activity, threads. Parameters: $run, $limit.
WITH n AS (
    SELECT count(*) AS n FROM complete_steps WHERE run = $run
), act AS (
    SELECT h.rank, h.tid, h.category, h.self_ns,
        regexp_replace(h.name, '^ProfilerStep#\d+$', 'ProfilerStep#N (outside any op)') AS name
    FROM host_activity h JOIN complete_steps c USING (run, rank, step)
    WHERE h.run = $run
), names AS (
    SELECT rank, tid, string_agg(DISTINCT role, ' / ' ORDER BY role) AS thread
    FROM (SELECT rank, tid, coalesce(nullif(regexp_extract(thread_name, '\(([^()]*)\)$', 1),
                                            ''), thread_name) AS role
          FROM threads WHERE run = $run AND thread_name IS NOT NULL)
    GROUP BY rank, tid
), labelled AS (
    SELECT a.*, coalesce(t.thread, 'tid ' || CAST(a.tid AS VARCHAR)) AS thread
    FROM act a LEFT JOIN names t ON t.rank = a.rank AND t.tid = a.tid
)
SELECT a.name,
    CASE
        WHEN a.name LIKE 'enumerate(DataLoader)%' THEN 'data_loader'
        WHEN a.name LIKE '%Synchronize%' OR a.name IN ('aten::item', 'aten::_local_scalar_dense',
                 'cudaMemcpy', 'hipMemcpy', 'cudaMemcpy2D', 'hipMemcpy2D') THEN 'sync'
        WHEN a.category IN ('cuda_runtime', 'cuda_driver', 'Runtime') THEN 'launch'
        WHEN a.category IN ('cpu_op', 'Operator') THEN 'cpu_op'
        WHEN a.category = 'python_function' OR a.name LIKE 'ProfilerStep#N%' THEN 'python'
        ELSE 'annotation'
    END AS kind,
    a.thread, sum(a.self_ns) / any_value(n.n) / 1e6 AS ms
FROM labelled a CROSS JOIN n
GROUP BY a.name, a.category, a.thread
HAVING sum(a.self_ns) / any_value(n.n) >= 1000  -- at least 1 us per rank and step
ORDER BY ms DESC, a.name, a.thread
LIMIT $limit;
