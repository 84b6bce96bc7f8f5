-- The report's nccl.ranks: one row per process of run $run that the NCCL_DEBUG logs give a
-- global rank, with its host, pid, GPU, PCI bus id (from its largest communicator),
-- network (IB | Socket) and NCCL version. Reads nccl_processes, nccl_comms; writes nothing.
SELECT p.global_rank AS rank, p.host, p.pid, p.cuda_dev,
       (SELECT arg_max(c.bus_id, c.nranks) FROM nccl_comms c
        WHERE c.run = p.run AND c.host = p.host AND c.pid = p.pid) AS bus_id,
       p.network, p.nccl_version
FROM nccl_processes p
WHERE p.run = $run AND p.global_rank IS NOT NULL
ORDER BY p.global_rank
