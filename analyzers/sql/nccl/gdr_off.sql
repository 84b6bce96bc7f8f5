-- Hosts of run $run none of whose IB channel connections use GPUDirect RDMA while some
-- other host's do: host, the global ranks of its processes with IB connections (every GPU
-- of a process that drives several) and its number of IB connections (n_ib).
-- Reads nccl_channels, nccl_processes; writes nothing.
WITH ib AS (
    SELECT host, count(*) AS n_ib, bool_or(gdr) AS any_gdr
    FROM nccl_channels WHERE run = $run AND tier = 'ib' GROUP BY host
)
SELECT ib.host,
       (SELECT list(DISTINCT p.global_rank ORDER BY p.global_rank) FROM nccl_processes p
        WHERE p.run = $run AND p.host = ib.host AND p.global_rank IS NOT NULL
          AND EXISTS (SELECT 1 FROM nccl_channels c
                      WHERE c.run = $run AND c.tier = 'ib' AND c.host = p.host
                        AND c.pid = p.pid)) AS ranks,
       ib.n_ib
FROM ib
WHERE NOT ib.any_gdr
  AND (SELECT bool_or(gdr) FROM nccl_channels WHERE run = $run AND tier = 'ib')
ORDER BY ib.host
