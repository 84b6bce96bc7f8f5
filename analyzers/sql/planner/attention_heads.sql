-- Attention heads per rank of run $run as its attention ops show them: the most common
-- head count of the query operand of forward attention ops of complete steps
-- (FlashAttention's [batch, seq, heads, head_dim], SDPA's [batch, heads, seq, head_dim]);
-- NULL without record_shapes. The planner multiplies it by TP. Reads cpu_ops,
-- complete_steps. Parameter: $run.
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), heads_of AS (
    SELECT CASE WHEN o.name IN ('aten::_flash_attention_forward',
                                'aten::_efficient_attention_forward')
                THEN TRY_CAST(o.input_dims -> '$[0]' AS BIGINT[])[3]
                ELSE TRY_CAST(o.input_dims -> '$[0]' AS BIGINT[])[2] END AS heads
    FROM cpu_ops o JOIN complete c ON c.rank = o.rank AND c.step = o.step
    WHERE o.run = $run AND o.input_dims IS NOT NULL AND o.name IN (
        'aten::_flash_attention_forward', 'aten::_efficient_attention_forward',
        'aten::_scaled_dot_product_flash_attention',
        'aten::_scaled_dot_product_efficient_attention',
        'aten::_scaled_dot_product_cudnn_attention')
)
SELECT mode(heads) AS heads FROM heads_of WHERE heads IS NOT NULL AND heads > 0;
