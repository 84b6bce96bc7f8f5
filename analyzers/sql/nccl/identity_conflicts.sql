-- Processes of run $run whose Kineto rank and NCCL global rank disagree: the same
-- (host, pid) under two ranks (none of its GPUs has the Kineto rank), or the same rank on
-- two hosts (only where the Kineto host is a real host name, ranks.host_source; NULL, in
-- rows written before host_source existed, counts as one). Reads ranks, nccl_processes;
-- writes nothing.
-- Columns: kineto_rank, nccl_rank, host, pid.
SELECT k.rank AS kineto_rank, p.global_rank AS nccl_rank, p.host, p.pid
FROM ranks k JOIN nccl_processes p
  ON p.run = k.run AND p.host = k.host AND p.pid = k.pid
WHERE k.run = $run AND p.global_rank IS DISTINCT FROM k.rank
  AND NOT EXISTS (SELECT 1 FROM nccl_processes q  -- a process driving several GPUs
                  WHERE q.run = k.run AND q.host = k.host AND q.pid = k.pid
                    AND q.global_rank = k.rank)
UNION ALL
SELECT k.rank, p.global_rank, p.host || ' vs ' || k.host, p.pid
FROM ranks k JOIN nccl_processes p ON p.run = k.run AND p.global_rank = k.rank
WHERE k.run = $run AND k.host IS NOT NULL AND p.host <> k.host
  AND coalesce(k.host_source, 'host_name') = 'host_name'
ORDER BY 1
