-- The op shapes the ranks of run $run ran: one row per distinct (op name, input dims)
-- among the CPU ops recorded with shapes (record_shapes), whichever rank ran them: the
-- work of one rank, whatever the number of ranks. Compare's default baseline looks for a
-- run with the same shapes per rank when no model spec decides.
-- Reads cpu_ops. Parameter: $run.
SELECT DISTINCT name, CAST(input_dims AS VARCHAR) AS dims
FROM cpu_ops
WHERE run = $run
  AND input_dims IS NOT NULL
  AND CAST(input_dims AS VARCHAR) NOT IN ('[]', 'null', '')
ORDER BY name, dims;
