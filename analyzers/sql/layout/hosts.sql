-- Nodes of run $run (the run_nodes view): nodes, GPUs per node (ranks per node, so that
-- their product is the world size), GPUs each node has, host source, which evidence won,
-- ranks traced, hosts seen, and whether the names put two ranks on one GPU index.
-- Reads the run_nodes view. Parameter: $run.
SELECT nodes, gpus_per_node, node_gpus, host_source, node_source, ranks_seen, hosts_seen,
    names_share_gpus
FROM run_nodes WHERE run = $run;
