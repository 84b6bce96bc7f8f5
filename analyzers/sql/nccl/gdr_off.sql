-- Hosts of run $run none of whose IB channel connections use GPUDirect RDMA while some
-- other host's do: host, its global ranks and its number of IB connections (n_ib).
-- Reads nccl_channels, nccl_processes; writes nothing.
SELECT c.host, list(DISTINCT p.global_rank ORDER BY p.global_rank) AS ranks,
       count(*) AS n_ib
FROM nccl_channels c
LEFT JOIN nccl_processes p ON p.run = c.run AND p.host = c.host AND p.pid = c.pid
WHERE c.run = $run AND c.tier = 'ib'
GROUP BY c.host
HAVING NOT bool_or(c.gdr)
   AND (SELECT bool_or(gdr) FROM nccl_channels WHERE run = $run AND tier = 'ib')
ORDER BY c.host
