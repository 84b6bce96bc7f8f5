-- The report's nccl.ranks: one row per GPU of run $run that the NCCL_DEBUG logs give a
-- global rank (a process driving several GPUs has a row for each), with its host, pid,
-- GPU, PCI bus id (from its largest communicator on that GPU), network (IB | Socket) and
-- NCCL version. Reads nccl_processes, nccl_comms; writes nothing.
SELECT p.global_rank AS rank, p.host, p.pid, p.cuda_dev,
       (SELECT first(c.bus_id ORDER BY c.nranks DESC, c.source_file, c.comm_ptr)
        FROM nccl_comms c
        WHERE c.run = p.run AND c.host = p.host AND c.pid = p.pid
          AND c.cuda_dev = p.cuda_dev) AS bus_id,
       p.network, p.nccl_version
FROM nccl_processes p
WHERE p.run = $run AND p.global_rank IS NOT NULL
ORDER BY p.global_rank, p.host, p.pid, p.cuda_dev
