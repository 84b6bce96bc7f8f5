-- Profiler-plugin ops of run $run: communicator size = ranks seen for the CommHash, and
-- algorithm / bus bandwidth from bytes and duration with the nccl-tests bus factors.
-- Reads and writes nccl_ops.
UPDATE nccl_ops AS o SET n_ranks = s.n,
    algo_bw_gbs = o.msg_bytes / nullif(o.exec_time_us, 0) / 1e3,
    bus_bw_gbs = o.msg_bytes / nullif(o.exec_time_us, 0) / 1e3 * CASE
        WHEN o.collective = 'all_reduce' THEN 2.0 * (s.n - 1) / s.n
        WHEN o.collective IN ('all_gather', 'reduce_scatter', 'all_to_all')
            THEN 1.0 * (s.n - 1) / s.n
        ELSE 1.0 END
FROM (SELECT comm_id, count(DISTINCT comm_rank) AS n FROM nccl_ops
      WHERE run = $run AND source = 'nccl_profiler' GROUP BY comm_id) s
WHERE o.run = $run AND o.source = 'nccl_profiler' AND o.comm_id = s.comm_id
