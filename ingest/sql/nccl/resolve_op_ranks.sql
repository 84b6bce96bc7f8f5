-- Global rank of each NCCL op of run $run (Inspector, profiler plugin), first source that
-- knows it: the NCCL log's process of the same host and pid, else the Kineto rank of that
-- host and pid, else its rank in a communicator spanning the whole world. Reads
-- nccl_processes, ranks; reads and writes nccl_ops.
UPDATE nccl_ops AS o SET rank = p.global_rank FROM nccl_processes p
WHERE o.run = $run AND p.run = $run AND o.host = p.host AND o.pid = p.pid
  AND p.global_rank IS NOT NULL;

UPDATE nccl_ops AS o SET rank = k.rank FROM ranks k
WHERE o.run = $run AND k.run = $run AND o.rank IS NULL AND o.host = k.host
  AND o.pid = k.pid;

UPDATE nccl_ops AS o SET rank = w.comm_rank FROM (
    SELECT DISTINCT host, pid, comm_rank FROM nccl_ops
    WHERE run = $run AND n_ranks = (SELECT max(n_ranks) FROM nccl_ops WHERE run = $run)
) w
WHERE o.run = $run AND o.rank IS NULL AND o.host IS NOT DISTINCT FROM w.host
  AND o.pid = w.pid;
