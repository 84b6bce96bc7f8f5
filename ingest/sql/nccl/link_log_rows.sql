-- After every NCCL_DEBUG log of run $run is in: communicator ids of channels, rings and
-- warnings (by host, pid and communicator pointer), each process's global rank (its rank
-- in the largest communicator it joined), and the warnings' global ranks. Reads and writes
-- nccl_channels, nccl_rings, nccl_warnings, nccl_processes; reads nccl_comms.
UPDATE nccl_channels AS c SET comm_id = m.comm_id FROM nccl_comms m
WHERE c.run = $run AND m.run = $run AND c.host = m.host AND c.pid = m.pid
  AND c.comm_ptr = m.comm_ptr;

UPDATE nccl_rings AS c SET comm_id = m.comm_id FROM nccl_comms m
WHERE c.run = $run AND m.run = $run AND c.host = m.host AND c.pid = m.pid
  AND c.comm_ptr = m.comm_ptr;

UPDATE nccl_warnings AS c SET comm_id = m.comm_id FROM nccl_comms m
WHERE c.run = $run AND m.run = $run AND c.host = m.host AND c.pid = m.pid
  AND c.comm_ptr = m.comm_ptr;

UPDATE nccl_processes AS p SET global_rank = w.rank
FROM (SELECT host, pid, arg_max(rank, nranks) AS rank FROM nccl_comms
      WHERE run = $run GROUP BY host, pid) w
WHERE p.run = $run AND p.host = w.host AND p.pid = w.pid;

UPDATE nccl_warnings AS c SET global_rank = p.global_rank FROM nccl_processes p
WHERE c.run = $run AND p.run = $run AND c.host = p.host AND c.pid = p.pid;
