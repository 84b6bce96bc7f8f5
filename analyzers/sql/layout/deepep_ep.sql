-- The number of RDMA ranks (nodes) DeepEP's internode kernels of run $run were compiled
-- for: the second template argument of `notify_dispatch<kLowLatencyMode, kNumRDMARanks>`
-- (deepseek-ai/DeepEP csrc/kernels/internode.cu; `deep_ep::` upstream, `dpsk::ep::` in
-- DeepSeek's own traces). NULL when no such kernel ran or the ranks disagree.
-- Reads collectives (kernel_name of communication-kernel rows); writes nothing.
WITH counts AS (
    SELECT DISTINCT CAST(regexp_extract(kernel_name,
        '(?:deep_ep|dpsk::ep)::(?:legacy::)?internode::notify_dispatch<(?:true|false), ?(\d{1,4})>',
        1) AS INTEGER) AS rdma_ranks
    FROM collectives
    WHERE run = $run AND source = 'comm_kernel'
      AND regexp_matches(kernel_name, '::internode::notify_dispatch<')
)
SELECT CASE WHEN count(*) = 1 THEN any_value(rdma_ranks) END AS rdma_ranks
FROM counts WHERE rdma_ranks IS NOT NULL
