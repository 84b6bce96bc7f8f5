-- Counted ops of run $run that ran inside a CUDA/HIP graph capture (counted_ops.in_capture,
-- mfu/flops.sql): their kernels were recorded into a graph, not run, so they give no FLOPs
-- (docs/attribution.md, "Graph captures"). Parameter: $run.
SELECT count(*) FROM counted_ops WHERE run = $run AND in_capture;
