-- nccl_identity_conflicts.sql for databases written before ranks.host_source existed
-- (every Kineto host counts as a real host name). Reads ranks, nccl_processes; writes
-- nothing. Parameter $run; columns: kineto_rank, nccl_rank, host, pid.
SELECT k.rank AS kineto_rank, p.global_rank AS nccl_rank, p.host, p.pid
FROM ranks k JOIN nccl_processes p
  ON p.run = k.run AND p.host = k.host AND p.pid = k.pid
WHERE k.run = $run AND p.global_rank IS DISTINCT FROM k.rank
UNION ALL
SELECT k.rank, p.global_rank, p.host || ' vs ' || k.host, p.pid
FROM ranks k JOIN nccl_processes p ON p.run = k.run AND p.global_rank = k.rank
WHERE k.run = $run AND k.host IS NOT NULL AND p.host <> k.host
ORDER BY 1
