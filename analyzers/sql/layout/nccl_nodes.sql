-- Nodes of run $run from its NCCL_DEBUG logs, for a run without profiler traces (no
-- run_nodes row): the largest communicator's size, the nNodes and localRanks its members
-- logged (`comm … nRanks … nNodes … localRanks …`), its hosts, CUDA devices and PCI bus
-- ids. Reads nccl_comms. Parameter: $run. No row without a communicator id.
-- Of communicators of one size (logs of several launches), the one most members logged.
WITH largest AS (
    SELECT comm_id FROM nccl_comms
    WHERE run = $run AND comm_id IS NOT NULL
    GROUP BY comm_id
    ORDER BY max(nranks) DESC, count(*) DESC, comm_id LIMIT 1
)
SELECT c.comm_id, max(c.nranks) AS nranks, max(c.nnodes) AS nnodes,
    min(c.nnodes) AS min_nnodes, min(c.local_ranks) AS min_local_ranks,
    max(c.local_ranks) AS local_ranks, count(DISTINCT c.host) AS hosts,
    list(DISTINCT c.cuda_dev ORDER BY c.cuda_dev) FILTER (WHERE c.cuda_dev IS NOT NULL)
        AS cuda_devs,
    list(DISTINCT c.bus_id ORDER BY c.bus_id) FILTER (WHERE c.bus_id IS NOT NULL) AS bus_ids,
    count(*) AS logged
FROM nccl_comms c JOIN largest USING (comm_id)
WHERE c.run = $run
GROUP BY c.comm_id;
