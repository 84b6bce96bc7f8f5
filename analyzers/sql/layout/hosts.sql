-- Nodes, GPUs per node and host source of run $run. Reads the run_nodes view.
-- Parameter: $run.
SELECT nodes, gpus_per_node, host_source FROM run_nodes WHERE run = $run;
