-- Tokens per micro-batch of run $run as its matmuls show them: the most common row
-- count of the activation operand of the GEMMs of complete steps (aten::addmm's second
-- input, aten::mm's first; a transformer's linear layers multiply [tokens, in] by
-- [in, out]); NULL without record_shapes. Reads cpu_ops, complete_steps.
-- Parameter: $run.
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), rows_of AS (
    SELECT CASE WHEN o.name = 'aten::addmm' THEN TRY_CAST(o.input_dims -> '$[1]' AS BIGINT[])[1]
                ELSE TRY_CAST(o.input_dims -> '$[0]' AS BIGINT[])[1] END AS m
    FROM cpu_ops o JOIN complete c ON c.rank = o.rank AND c.step = o.step
    WHERE o.run = $run AND o.name IN ('aten::addmm', 'aten::mm') AND o.input_dims IS NOT NULL
)
SELECT mode(m) AS tokens, count(*) AS n FROM rows_of WHERE m IS NOT NULL AND m > 0;
