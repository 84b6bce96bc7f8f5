-- Global rank of each NCCL op of run $run (Inspector, profiler plugin), first source that
-- knows it: the NCCL log's communicator of the same id and communicator rank (its GPU's
-- global rank), else the log's process of the same host and pid when it drives one GPU,
-- else the Kineto rank of that host and pid, else its rank in a communicator spanning the
-- whole world. Reads nccl_comms, nccl_processes, ranks; reads and writes nccl_ops.
UPDATE nccl_ops AS o SET rank = g.global_rank
FROM (SELECT c.comm_id, c.rank, min(p.global_rank) AS global_rank
      FROM nccl_comms c
      JOIN nccl_processes p ON p.run = c.run AND p.host = c.host AND p.pid = c.pid
                           AND p.cuda_dev = c.cuda_dev
      WHERE c.run = $run AND c.comm_id IS NOT NULL AND p.global_rank IS NOT NULL
      GROUP BY ALL) g
WHERE o.run = $run AND o.comm_id = g.comm_id AND o.comm_rank = g.rank;

UPDATE nccl_ops AS o SET rank = p.global_rank
FROM (SELECT host, pid, min(global_rank) AS global_rank FROM nccl_processes
      WHERE run = $run AND global_rank IS NOT NULL GROUP BY ALL
      HAVING count(DISTINCT cuda_dev) = 1) p
WHERE o.run = $run AND o.rank IS NULL AND o.host = p.host AND o.pid = p.pid;

UPDATE nccl_ops AS o SET rank = k.rank
FROM (SELECT host, pid, min(rank) AS rank FROM ranks WHERE run = $run GROUP BY ALL) k
WHERE o.run = $run AND o.rank IS NULL AND o.host = k.host AND o.pid = k.pid;

UPDATE nccl_ops AS o SET rank = w.comm_rank FROM (
    SELECT DISTINCT host, pid, comm_rank FROM nccl_ops
    WHERE run = $run AND n_ranks = (SELECT max(n_ranks) FROM nccl_ops WHERE run = $run)
) w
WHERE o.run = $run AND o.rank IS NULL AND o.host IS NOT DISTINCT FROM w.host
  AND o.pid = w.pid;
