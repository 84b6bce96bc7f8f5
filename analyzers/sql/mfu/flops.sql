-- FLOPs of matmul, attention and convolution ops from their `Input Dims` (Kineto writes
-- no FLOP counts). One row per counted CPU op of the run:
--   model_flops    what the op contributes to model FLOPs (backward = 2x forward);
--   hardware_extra FLOPs executed beyond that (FlashAttention backward re-computes QK^T:
--                  2.5x forward instead of 2x);
--   is_recompute   the op re-runs forward work for activation checkpointing.
-- Composites (aten::linear, aten::matmul) count only when none of their children is a
-- counted primitive; attention counts the full (non-causal) square, PaLM's convention.
-- Defines the temporary table macro model_flops(run_name) (analyzers._sql.install_macros);
-- reads cpu_ops and recompute_ops.
CREATE OR REPLACE TEMP MACRO model_flops(run_name) AS TABLE
WITH counted AS (
    SELECT o.rank, o.op_id, o.parent_id, o.name, o.step, o.input_dims, o.concrete_inputs
    FROM cpu_ops o
    WHERE o.run = run_name AND o.input_dims IS NOT NULL AND o.name IN (
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
        TRY_CAST(c.input_dims -> '$[0]' AS BIGINT[]) AS d0,
        TRY_CAST(c.input_dims -> '$[1]' AS BIGINT[]) AS d1,
        TRY_CAST(c.input_dims -> '$[2]' AS BIGINT[]) AS d2
    FROM counted c
    WHERE c.name NOT IN ('aten::linear', 'aten::matmul')
       OR NOT EXISTS (SELECT 1 FROM primitive_children p
                      WHERE p.rank = c.rank AND p.op_id = c.op_id)
), flops AS (
    SELECT rank, op_id, step, name,
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
                     * ((d0[3] + 2 * coalesce(TRY_CAST(concrete_inputs ->> '$[4]' AS INTEGER[])[1], 0)
                         - coalesce(TRY_CAST(concrete_inputs ->> '$[5]' AS INTEGER[])[1], 1) * (d1[3] - 1) - 1)
                        // coalesce(TRY_CAST(concrete_inputs ->> '$[3]' AS INTEGER[])[1], 1) + 1)
                     * ((d0[4] + 2 * coalesce(TRY_CAST(concrete_inputs ->> '$[4]' AS INTEGER[])[2], 0)
                         - coalesce(TRY_CAST(concrete_inputs ->> '$[5]' AS INTEGER[])[2], 1) * (d1[4] - 1) - 1)
                        // coalesce(TRY_CAST(concrete_inputs ->> '$[3]' AS INTEGER[])[2], 1) + 1)
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
)
SELECT f.rank, f.op_id, f.step, f.name, f.model_flops,
    CASE WHEN f.name LIKE '%attention_backward' THEN f.model_flops * 0.25 ELSE 0 END
        AS hardware_extra,
    r.op_id IS NOT NULL AS is_recompute
FROM flops f
LEFT JOIN recompute_ops r ON r.run = run_name AND r.rank = f.rank AND r.op_id = f.op_id
WHERE f.model_flops IS NOT NULL AND f.model_flops > 0;
