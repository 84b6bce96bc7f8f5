-- The GPUs per node of run $run (run_nodes.gpus_per_node, NULL when unknown or uneven):
-- among runs of one model spec, Compare's default baseline prefers the same node shape.
-- Reads run_nodes. Parameter: $run.
SELECT gpus_per_node FROM run_nodes WHERE run = $run;
