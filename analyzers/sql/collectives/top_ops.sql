-- ms per rank and step of each kernel (full name: distinct kernels, e.g. templates in an
-- `(anonymous namespace)`, are never merged; CPU-only runs: leaf CPU ops)
-- over the complete steps of run $run, for the diff's top ops. Reads complete_steps,
-- gpu_ops, cpu_ops. Parameter: $run.
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), n AS (SELECT count(*) AS n FROM complete),
gpu AS (
    SELECT g.name AS op, sum(g.dur_ns) AS t
    FROM gpu_ops g JOIN complete c ON c.rank = g.rank AND c.step = g.step
    WHERE g.run = $run GROUP BY 1
), cpu AS (
    SELECT o.name AS op, sum(o.dur_ns) AS t
    FROM cpu_ops o JOIN complete c ON c.rank = o.rank AND c.step = o.step
    WHERE o.run = $run AND o.category = 'cpu_op'
      AND NOT EXISTS (SELECT 1 FROM cpu_ops k WHERE k.run = o.run AND k.rank = o.rank
                                                AND k.parent_id = o.op_id)
      AND NOT EXISTS (SELECT 1 FROM gpu_ops WHERE run = $run)
    GROUP BY 1
)
SELECT op, t / (SELECT n FROM n) / 1e6 AS ms_per_step
FROM (SELECT * FROM gpu UNION ALL SELECT * FROM cpu);
