-- One row per NCCL communicator of run $run seen in NCCL_DEBUG logs: its members as global
-- ranks (each GPU's rank in the largest communicator it joined), hosts, the transports
-- of its channel connections, and the process group(s) with exactly those members.
WITH members AS (
    SELECT c.comm_id, max(c.nranks) AS nranks, max(c.nnodes) AS nnodes,
           list(DISTINCT p.global_rank ORDER BY p.global_rank)
               FILTER (WHERE p.global_rank IS NOT NULL) AS ranks,
           list(DISTINCT c.host ORDER BY c.host) AS hosts, count(*) AS n_logged
    FROM nccl_comms c
    LEFT JOIN nccl_processes p ON p.run = c.run AND p.host = c.host AND p.pid = c.pid
                              AND p.cuda_dev = c.cuda_dev
    WHERE c.run = $run AND c.comm_id IS NOT NULL
    GROUP BY c.comm_id
),
links AS (
    SELECT comm_id, list(DISTINCT tier ORDER BY tier) AS tiers,
           count(*) FILTER (WHERE tier IN ('ib', 'net', 'socket', 'collnet')) AS n_net,
           -- connections whose transport says whether it uses GPUDirect RDMA (/GDRDMA):
           -- NET/IB and network plugins (NET/AWS Libfabric, ...: tier net)
           count(*) FILTER (WHERE tier IN ('ib', 'net')) AS n_ib,
           count(*) FILTER (WHERE tier IN ('ib', 'net') AND gdr) AS n_ib_gdr,
           count(*) FILTER (WHERE tier = 'socket') AS n_socket
    FROM nccl_channels WHERE run = $run AND comm_id IS NOT NULL
    GROUP BY comm_id
),
groups AS (
    SELECT list_sort(ranks) AS ranks, list(pg_name ORDER BY pg_name) AS pg_names,
           list(DISTINCT pg_desc ORDER BY pg_desc) AS pg_descs
    FROM (SELECT pg_name, any_value(pg_desc) AS pg_desc, any_value(ranks) AS ranks
          FROM process_groups WHERE run = $run GROUP BY pg_name)
    GROUP BY list_sort(ranks)
)
SELECT m.comm_id, m.nranks, m.nnodes, m.ranks, m.hosts, m.n_logged,
       coalesce(l.tiers, []) AS tiers, coalesce(l.n_net, 0) AS n_net,
       coalesce(l.n_ib, 0) AS n_ib, coalesce(l.n_ib_gdr, 0) AS n_ib_gdr,
       coalesce(l.n_socket, 0) AS n_socket,
       coalesce(g.pg_names, []) AS pg_names, coalesce(g.pg_descs, []) AS pg_descs
FROM members m
LEFT JOIN links l USING (comm_id)
LEFT JOIN groups g ON g.ranks = m.ranks
ORDER BY m.nranks DESC, m.ranks
