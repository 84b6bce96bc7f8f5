-- Which process of run $run joined which NCCL communicator (`Init COMPLETE` lines), for
-- telling launches apart (analyzers/comm/launches.py): one row per process and
-- communicator, with the communicator's size and where the process first shows it.
-- Reads nccl_comms; writes nothing. Parameter: $run.
SELECT host, pid, comm_id, max(nranks) AS nranks, min(source_file) AS source_file,
       min(init_line) AS init_line
FROM nccl_comms
WHERE run = $run AND comm_id IS NOT NULL
GROUP BY host, pid, comm_id
ORDER BY host, pid, comm_id
