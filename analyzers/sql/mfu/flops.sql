-- FLOPs of matmul, attention and convolution ops from their `Input Dims` (Kineto writes
-- no FLOP counts). One row per counted CPU op of the run:
--   model_flops    what the op contributes to model FLOPs (backward = 2x forward);
--   hardware_extra FLOPs executed beyond that (FlashAttention backward re-computes QK^T:
--                  2.5x forward instead of 2x);
--   is_recompute   the op re-runs forward work for activation checkpointing.
-- Composites (aten::linear, aten::matmul) count only when none of their children is a
-- counted primitive; attention counts the full (non-causal) square, PaLM's convention.
-- Each op tree is counted once, by one rule: an op with a FLOP formula is not counted
-- under an ancestor (an enclosing op on its thread, cpu_ops.parent_id's containment) that
-- is counted, so aten::_scaled_dot_product_flash_attention counts and its child
-- aten::_flash_attention_forward does not (likewise efficient/cuDNN attention, their
-- backwards, and aten::linear over aten::matmul over aten::mm).
-- Defines three temporary table macros and a temporary table (analyzers._sql.install_macros):
--   flops_claims(run_name, lo, hi)  every counted op of the ranks lo..hi of the run, with
--                                   kernel_ns: the GPU time of the compute kernels it
--                                   launched (itself or through its children, up to 3
--                                   levels down; NULL when none). Reads cpu_ops, gpu_ops
--                                   and recompute_ops; the rank range is in every part,
--                                   so a batch of ranks costs the memory of those ranks
--                                   (analyzers/flops/counted_ops.py fills counted_ops with it);
--                                   in_capture: the op ran inside a CUDA/HIP graph capture
--                                   (begin- to end-capture call on its thread), so its
--                                   kernels were recorded into the graph, not run;
--   model_flops(run_name, max_rate) the ops of counted_ops, not captured, whose FLOPs their kernels could
--                                   have done at `max_rate` FLOP/s (docs/mfu.md,
--                                   "Implausible shapes"); NULL max_rate keeps every op.
--   kernel_ops(run_name, lo, hi)    every GPU op of the ranks lo..hi with op_id, the CPU op it
--                                   belongs to: the op with its External id (cpu_op_id), or,
--                                   where the trace links the kernel only by correlation to
--                                   its launch call (cpu_op_id NULL: the real 8-rank V100 DLRM
--                                   job, whose kernels' External id is their correlation), the
--                                   op that encloses that launch call (its parent). Read by the
--                                   kernel time below and the roofline (roofline/kernels.sql).
CREATE OR REPLACE TEMP MACRO kernel_ops(run_name, lo, hi) AS TABLE
SELECT g.rank, g.step, g.gpu_op_id, g.name, g.kind, g.dur_ns, g.launch_op_id,
    coalesce(g.cpu_op_id, l.parent_id) AS op_id
FROM gpu_ops g
LEFT JOIN cpu_ops l ON g.cpu_op_id IS NULL AND l.run = run_name AND l.rank BETWEEN lo AND hi
    AND l.rank = g.rank AND l.op_id = g.launch_op_id
WHERE g.run = run_name AND g.rank BETWEEN lo AND hi;

CREATE OR REPLACE TEMP MACRO flops_claims(run_name, lo, hi) AS TABLE
WITH counted AS (
    SELECT o.rank, o.op_id, o.parent_id, o.name, o.step, o.input_dims, o.concrete_inputs,
        o.tid, o.depth, o.start_ns, o.end_ns
    FROM cpu_ops o
    WHERE o.run = run_name AND o.rank BETWEEN lo AND hi AND o.input_dims IS NOT NULL
      AND o.name IN (
        'aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm',
        'aten::_scaled_dot_product_flash_attention', 'aten::_scaled_dot_product_efficient_attention',
        'aten::_scaled_dot_product_cudnn_attention',
        'aten::_scaled_dot_product_flash_attention_backward',
        'aten::_scaled_dot_product_efficient_attention_backward',
        'aten::_scaled_dot_product_cudnn_attention_backward',
        'aten::_flash_attention_forward', 'aten::_efficient_attention_forward',
        'aten::_flash_attention_backward', 'aten::_efficient_attention_backward',
        'aten::convolution', 'aten::convolution_backward', 'aten::linear', 'aten::matmul')
), primitive_children AS (
    SELECT DISTINCT c.rank, c.parent_id AS op_id FROM counted c
    WHERE c.name NOT IN ('aten::linear', 'aten::matmul') AND c.parent_id IS NOT NULL
), shaped AS (
    SELECT c.*,
        -- DOUBLE, not BIGINT: products of shapes overflow integers and DECIMAL(38) (a
        -- hostile `[2**40, 2**40]` must give a huge number, which mfu.py bounds, not an
        -- error); a double is exact for every real product (< 2^53)
        TRY_CAST(c.input_dims -> '$[0]' AS DOUBLE[]) AS d0,
        TRY_CAST(c.input_dims -> '$[1]' AS DOUBLE[]) AS d1,
        TRY_CAST(c.input_dims -> '$[2]' AS DOUBLE[]) AS d2
    FROM counted c
    WHERE c.name NOT IN ('aten::linear', 'aten::matmul')
       OR NOT EXISTS (SELECT 1 FROM primitive_children p
                      WHERE p.rank = c.rank AND p.op_id = c.op_id)
), flops AS (
    SELECT rank, op_id, step, name, tid, depth, start_ns, end_ns,
        CASE
            WHEN name = 'aten::mm' AND len(d0) = 2 THEN 2.0 * d0[1] * d0[2] * d1[2]
            WHEN name = 'aten::addmm' AND len(d1) = 2 THEN 2.0 * d1[1] * d1[2] * d2[2]
            WHEN name = 'aten::bmm' AND len(d0) = 3 THEN 2.0 * d0[1] * d0[2] * d0[3] * d1[3]
            WHEN name = 'aten::baddbmm' AND len(d1) = 3 THEN 2.0 * d1[1] * d1[2] * d1[3] * d2[3]
            -- [batch, heads, seq, head_dim]
            WHEN name IN ('aten::_scaled_dot_product_flash_attention',
                          'aten::_scaled_dot_product_efficient_attention',
                          'aten::_scaled_dot_product_cudnn_attention') AND len(d0) = 4
                THEN 4.0 * d0[1] * d0[2] * d0[3] * d1[3] * d0[4]
            WHEN name IN ('aten::_scaled_dot_product_flash_attention_backward',
                          'aten::_scaled_dot_product_efficient_attention_backward',
                          'aten::_scaled_dot_product_cudnn_attention_backward') AND len(d1) = 4
                THEN 8.0 * d1[1] * d1[2] * d1[3] * d2[3] * d1[4]
            -- [batch, seq, heads, head_dim]
            WHEN name IN ('aten::_flash_attention_forward', 'aten::_efficient_attention_forward')
                 AND len(d0) = 4
                THEN 4.0 * d0[1] * d0[3] * d0[2] * d1[2] * d0[4]
            WHEN name IN ('aten::_flash_attention_backward', 'aten::_efficient_attention_backward')
                 AND len(d1) = 4
                THEN 8.0 * d1[1] * d1[3] * d1[2] * d2[2] * d1[4]
            -- input [N, C, H, W], weight [K, C/g, R, S]; output size from stride/padding/dilation
            WHEN name = 'aten::convolution' AND len(d0) = 4 AND len(d1) = 4
                THEN 2.0 * d0[1] * d1[1] * d1[2] * d1[3] * d1[4]
                     * (floor((d0[3] + 2 * coalesce(TRY_CAST(concrete_inputs ->> '$[4]' AS DOUBLE[])[1], 0)
                         - coalesce(TRY_CAST(concrete_inputs ->> '$[5]' AS DOUBLE[])[1], 1) * (d1[3] - 1) - 1)
                        / coalesce(TRY_CAST(concrete_inputs ->> '$[3]' AS DOUBLE[])[1], 1)) + 1)
                     * (floor((d0[4] + 2 * coalesce(TRY_CAST(concrete_inputs ->> '$[4]' AS DOUBLE[])[2], 0)
                         - coalesce(TRY_CAST(concrete_inputs ->> '$[5]' AS DOUBLE[])[2], 1) * (d1[4] - 1) - 1)
                        / coalesce(TRY_CAST(concrete_inputs ->> '$[3]' AS DOUBLE[])[2], 1)) + 1)
            -- grad_out [N, K, H', W'], weight [K, C/g, R, S]: data + weight gradients
            WHEN name = 'aten::convolution_backward' AND len(d0) = 4 AND len(d2) = 4
                THEN 4.0 * d0[1] * d0[2] * d0[3] * d0[4] * d2[2] * d2[3] * d2[4]
            -- input [..., in], weight [out, in]
            WHEN name = 'aten::linear' AND len(d0) >= 2 AND len(d1) = 2
                THEN 2.0 * list_reduce(d0, lambda a, b: a * b) * d1[1]
            WHEN name = 'aten::matmul' AND len(d0) = 2 AND len(d1) = 2 THEN 2.0 * d0[1] * d0[2] * d1[2]
            WHEN name = 'aten::matmul' AND len(d0) = 3 AND len(d1) = 2
                THEN 2.0 * d0[1] * d0[2] * d0[3] * d1[2]
            ELSE NULL
        END AS model_flops
    FROM shaped
), formula AS (   -- the ops whose formula gives FLOPs
    SELECT * FROM flops WHERE model_flops IS NOT NULL AND model_flops > 0
), once AS (      -- ... less those under another such op (the op tree counts once)
    SELECT f.* FROM formula f
    WHERE NOT EXISTS (
        SELECT 1 FROM formula a
        WHERE a.rank = f.rank AND a.tid = f.tid AND a.depth < f.depth
          AND a.start_ns <= f.start_ns AND a.end_ns >= f.end_ns)
), capture AS (   -- CUDA/HIP graph captures: from each begin-capture call to the first
                  -- end-capture call after it on its thread (none: to the trace's end)
    SELECT b.rank, b.tid, b.start_ns AS cs, min(e.end_ns) AS ce
    FROM cpu_ops b
    LEFT JOIN cpu_ops e ON e.run = run_name AND e.rank = b.rank AND e.tid = b.tid
        AND e.start_ns >= b.start_ns AND e.name IN ('cudaStreamEndCapture',
            'hipStreamEndCapture', 'cuStreamEndCapture')
    WHERE b.run = run_name AND b.rank BETWEEN lo AND hi
      AND b.name IN ('cudaStreamBeginCapture', 'cudaStreamBeginCapture_v2',
                     'cudaStreamBeginCaptureToGraph', 'hipStreamBeginCapture',
                     'hipStreamBeginCaptureToGraph', 'cuStreamBeginCapture',
                     'cuStreamBeginCapture_v2')
    GROUP BY b.rank, b.tid, b.start_ns
), launched AS (  -- compute-kernel time per CPU op (kernel_ops: External id or launch)
    SELECT rank, op_id, sum(dur_ns) AS ns
    FROM kernel_ops(run_name, lo, hi)
    WHERE kind = 'compute' AND op_id IS NOT NULL
    GROUP BY rank, op_id
), lineage AS (   -- each launching op and its ancestors, three levels up
    SELECT l.rank, unnest([l.op_id, p1.op_id, p2.op_id, p3.op_id]) AS op_id, l.ns
    FROM launched l
    LEFT JOIN cpu_ops o ON o.run = run_name AND o.rank BETWEEN lo AND hi
        AND o.rank = l.rank AND o.op_id = l.op_id
    LEFT JOIN cpu_ops p1 ON p1.run = run_name AND p1.rank BETWEEN lo AND hi
        AND p1.rank = l.rank AND p1.op_id = o.parent_id
    LEFT JOIN cpu_ops p2 ON p2.run = run_name AND p2.rank BETWEEN lo AND hi
        AND p2.rank = l.rank AND p2.op_id = p1.parent_id
    LEFT JOIN cpu_ops p3 ON p3.run = run_name AND p3.rank BETWEEN lo AND hi
        AND p3.rank = l.rank AND p3.op_id = p2.parent_id
), kernel_time AS (
    SELECT rank, op_id, sum(ns) AS kernel_ns FROM lineage WHERE op_id IS NOT NULL
    GROUP BY rank, op_id
)
SELECT f.rank, f.op_id, f.step, f.name, f.model_flops,
    CASE WHEN f.name LIKE '%attention_backward' THEN f.model_flops * 0.25 ELSE 0 END
        AS hardware_extra,
    r.op_id IS NOT NULL AS is_recompute,
    k.kernel_ns,
    EXISTS (SELECT 1 FROM capture c WHERE c.rank = f.rank AND c.tid = f.tid
            AND f.start_ns >= c.cs AND (c.ce IS NULL OR f.start_ns <= c.ce)) AS in_capture
FROM once f
LEFT JOIN recompute_ops r ON r.run = run_name AND r.rank BETWEEN lo AND hi
    AND r.rank = f.rank AND r.op_id = f.op_id
LEFT JOIN kernel_time k ON k.rank = f.rank AND k.op_id = f.op_id;

-- counted_ops: the counted ops of the runs being reported, with their run; empty until
-- analyzers/flops/counted_ops.py fills it (counted_ops/fill.sql) and empty again after (the
-- macro over no rank gives the columns their types).
CREATE TEMP TABLE IF NOT EXISTS counted_ops AS
SELECT ''::VARCHAR AS run, * FROM flops_claims('', 1, 0);

CREATE OR REPLACE TEMP MACRO model_flops(run_name, max_rate) AS TABLE
SELECT rank, op_id, step, name, model_flops, hardware_extra, is_recompute
FROM counted_ops
WHERE run = run_name AND NOT in_capture
  AND (max_rate IS NULL OR coalesce(kernel_ns, 0) <= 0
   OR model_flops + hardware_extra <= max_rate * kernel_ns / 1e9);
