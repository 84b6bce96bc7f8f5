-- Compute-kernel time and model FLOPs of run $run by what the kernels compute, per rank
-- and complete step (mean over ranks of each rank's mean over its complete steps), for
-- the planner's calibration (analyzers/plan/calibrate.py, docs/planner.md). A kernel's kind:
--   recompute  launched by a recompute op (recompute_ops);
--   gemm, attention, conv  launched by an op the model_flops macro counts (mfu/flops.sql);
--   optimizer  launched inside an `Optimizer.step#...` annotation, or an Adam /
--              multi-tensor-apply kernel or op;
--   other      everything else (element-wise, norms, softmax, ...).
-- ms is the summed kernel time (not the attributed compute, which counts overlapping
-- kernels once); flops the counted model FLOPs of the kind's ops.
-- Reads gpu_ops, cpu_ops, recompute_ops, complete_steps and the kernel_ops and model_flops
-- macros.
-- Parameters: $run; $max_rate, the most FLOP/s an op's kernels may be credited with
-- (analyzers/flops/bound.py: ops claiming more are left out, as for MFU; NULL: no bound).
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), n_steps AS (
    SELECT rank, count(*) AS n FROM complete GROUP BY rank
), counted AS (
    SELECT rank, op_id, name, model_flops, is_recompute FROM model_flops($run, $max_rate)
), optimizer_spans AS (
    SELECT rank, start_ns, end_ns FROM cpu_ops
    WHERE run = $run AND name LIKE 'Optimizer.step#%'
), kernels AS (
    -- the kernel's op as the roofline finds it (mfu/flops.sql's kernel_ops: its External
    -- id's op, else the op enclosing its launch call)
    SELECT g.rank, g.dur_ns, g.name, g.op_id AS cpu_op_id, l.start_ns AS launch_ns
    FROM kernel_ops($run, -2147483648, 2147483647) g
    JOIN complete c ON c.rank = g.rank AND c.step = g.step
    LEFT JOIN cpu_ops l ON l.run = $run AND l.rank = g.rank AND l.op_id = g.launch_op_id
    WHERE g.kind = 'compute'
), classified AS (
    SELECT k.rank, k.dur_ns,
        CASE
            WHEN r.op_id IS NOT NULL THEN 'recompute'
            WHEN f.op_id IS NOT NULL AND f.name ILIKE '%attention%' THEN 'attention'
            WHEN f.op_id IS NOT NULL AND f.name ILIKE '%convolution%' THEN 'conv'
            WHEN f.op_id IS NOT NULL THEN 'gemm'
            WHEN k.name ILIKE '%adam%' OR k.name ILIKE 'multi_tensor_apply%'
                 OR o.name ILIKE '%adam%' OR o.name ILIKE '%optimizer%'
                 OR EXISTS (SELECT 1 FROM optimizer_spans s
                            WHERE s.rank = k.rank AND k.launch_ns >= s.start_ns
                              AND k.launch_ns < s.end_ns) THEN 'optimizer'
            ELSE 'other'
        END AS kind
    FROM kernels k
    LEFT JOIN recompute_ops r ON r.run = $run AND r.rank = k.rank AND r.op_id = k.cpu_op_id
    LEFT JOIN counted f ON f.rank = k.rank AND f.op_id = k.cpu_op_id AND NOT f.is_recompute
    LEFT JOIN cpu_ops o ON o.run = $run AND o.rank = k.rank AND o.op_id = k.cpu_op_id
), kernel_time AS (
    SELECT c.rank, c.kind, sum(c.dur_ns) / any_value(n.n) AS ns_per_step
    FROM classified c JOIN n_steps n USING (rank)
    GROUP BY c.rank, c.kind
), op_flops AS (
    SELECT f.rank,
        CASE WHEN f.is_recompute THEN 'recompute'
             WHEN f.name ILIKE '%attention%' THEN 'attention'
             WHEN f.name ILIKE '%convolution%' THEN 'conv'
             ELSE 'gemm' END AS kind,
        sum(f.model_flops ORDER BY f.model_flops) / any_value(n.n) AS flops_per_step
    FROM model_flops($run, $max_rate) f
    JOIN complete c ON c.rank = f.rank AND c.step = f.step
    JOIN n_steps n ON n.rank = f.rank
    GROUP BY f.rank, kind
), ranks AS (
    SELECT count(*) AS n FROM n_steps
)
SELECT kind,
    sum(ns_per_step ORDER BY ns_per_step) / any_value(ranks.n) / 1e6 AS ms,
    coalesce(sum(flops_per_step ORDER BY flops_per_step), 0) / any_value(ranks.n) AS flops
FROM kernel_time t
FULL JOIN op_flops f USING (rank, kind)
CROSS JOIN ranks
GROUP BY kind
ORDER BY kind;
