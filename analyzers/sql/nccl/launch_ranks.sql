-- The global rank of every GPU of run $run's processes in the NCCL logs (its rank in
-- the largest communicator it joined), for listing each launch's ranks per host
-- (analyzers/comm/launches.py). Reads nccl_processes; writes nothing. Parameter: $run.
SELECT host, pid, global_rank
FROM nccl_processes
WHERE run = $run AND global_rank IS NOT NULL
ORDER BY host, pid, global_rank
