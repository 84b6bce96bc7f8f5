-- Attention FLOPs and all FLOPs re-executed for activation checkpointing in run $run.
-- Reads the model_flops macro (mfu/flops.sql). Parameters: $run, $max_rate (mfu/flops.sql).
SELECT sum(model_flops) FILTER (WHERE name LIKE '%attention%'), sum(model_flops)
FROM model_flops($run, $max_rate) WHERE is_recompute;
