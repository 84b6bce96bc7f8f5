-- After every NCCL_DEBUG log of run $run is in: communicator ids of channels, rings and
-- warnings (by host, pid and communicator pointer), each GPU's global rank (its rank in
-- the largest communicator that GPU joined; among equals the earliest initialised), the
-- warnings' global ranks (through their communicator's GPU, else the line's GPU, else the
-- process's only GPU), and GPUDirect RDMA use of GPUs whose logs lack the status line
-- (any network connection of that GPU via /GDRDMA). Every match is on a grouped (unique)
-- side, so duplicated files cannot make an update ambiguous. Reads and writes
-- nccl_channels, nccl_rings, nccl_warnings, nccl_processes; reads nccl_comms.
UPDATE nccl_channels AS c SET comm_id = m.comm_id
FROM (SELECT host, pid, comm_ptr, min(comm_id) AS comm_id FROM nccl_comms
      WHERE run = $run GROUP BY ALL) m
WHERE c.run = $run AND c.host = m.host AND c.pid = m.pid AND c.comm_ptr = m.comm_ptr;

UPDATE nccl_rings AS c SET comm_id = m.comm_id
FROM (SELECT host, pid, comm_ptr, min(comm_id) AS comm_id FROM nccl_comms
      WHERE run = $run GROUP BY ALL) m
WHERE c.run = $run AND c.host = m.host AND c.pid = m.pid AND c.comm_ptr = m.comm_ptr;

UPDATE nccl_warnings AS c SET comm_id = m.comm_id
FROM (SELECT host, pid, comm_ptr, min(comm_id) AS comm_id FROM nccl_comms
      WHERE run = $run GROUP BY ALL) m
WHERE c.run = $run AND c.host = m.host AND c.pid = m.pid AND c.comm_ptr = m.comm_ptr;

UPDATE nccl_processes AS p SET global_rank = w.rank
FROM (SELECT host, pid, cuda_dev,
             first(rank ORDER BY nranks DESC, source_file, init_line, comm_ptr) AS rank
      FROM nccl_comms WHERE run = $run GROUP BY ALL) w
WHERE p.run = $run AND p.host = w.host AND p.pid = w.pid AND p.cuda_dev = w.cuda_dev;

UPDATE nccl_warnings AS c SET global_rank = g.global_rank
FROM (SELECT m.host, m.pid, m.comm_ptr, min(p.global_rank) AS global_rank
      FROM (SELECT DISTINCT host, pid, comm_ptr, cuda_dev FROM nccl_comms
            WHERE run = $run) m
      JOIN nccl_processes p ON p.run = $run AND p.host = m.host AND p.pid = m.pid
                           AND p.cuda_dev = m.cuda_dev
      GROUP BY ALL) g
WHERE c.run = $run AND c.host = g.host AND c.pid = g.pid AND c.comm_ptr = g.comm_ptr;

UPDATE nccl_warnings AS c SET global_rank = g.global_rank
FROM (SELECT host, pid, cuda_dev, min(global_rank) AS global_rank FROM nccl_processes
      WHERE run = $run GROUP BY ALL) g
WHERE c.run = $run AND c.global_rank IS NULL AND c.host = g.host AND c.pid = g.pid
  AND c.cuda_dev = g.cuda_dev;

UPDATE nccl_warnings AS c SET global_rank = g.global_rank
FROM (SELECT host, pid, min(global_rank) AS global_rank FROM nccl_processes
      WHERE run = $run GROUP BY ALL HAVING count(DISTINCT cuda_dev) = 1) g
WHERE c.run = $run AND c.global_rank IS NULL AND c.host = g.host AND c.pid = g.pid;

UPDATE nccl_processes AS p SET gdr = e.gdr
FROM (SELECT host, pid, cuda_dev, bool_or(gdr) AS gdr FROM nccl_channels
      WHERE run = $run AND tier IN ('ib', 'net', 'collnet') GROUP BY ALL) e
WHERE p.run = $run AND p.gdr IS NULL AND p.host = e.host AND p.pid = e.pid
  AND p.cuda_dev = e.cuda_dev;
