-- The rank ranges (lo, hi, both included) of the batches that the per-rank passes over
-- run $run read it in (counted_ops/fill.sql, roofline/kernels_fill.sql,
-- critical_path/graph.sql): the ranks with CPU or GPU ops, $per to a batch, in rank
-- order. Parameters: $run, $per.
WITH r AS (
    SELECT rank FROM cpu_ops WHERE run = $run AND rank IS NOT NULL
    UNION
    SELECT rank FROM gpu_ops WHERE run = $run AND rank IS NOT NULL
), numbered AS (
    SELECT rank, (row_number() OVER (ORDER BY rank) - 1) // $per AS batch FROM r
)
SELECT min(rank) AS lo, max(rank) AS hi FROM numbered GROUP BY batch ORDER BY batch;
