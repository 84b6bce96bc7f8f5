-- One row per nccl-tests result table of run $run (nccl_bench_summary): its rows' mean
-- and best bus bandwidth (the size and placement of the best), and the transports of the
-- communicators of the same log file with the table's rank count (all of the file's when
-- the table names no ranks). Reads nccl_bench_summary, nccl_bench, nccl_comms,
-- nccl_channels; writes nothing. Parameter: $run.
WITH rows AS (
    SELECT source_file, bench, avg(busbw_gbs) AS mean_bw,
           arg_max(struct_pack(bw := busbw_gbs, size := size_bytes, in_place := in_place),
                   busbw_gbs) AS best
    FROM nccl_bench WHERE run = $run AND busbw_gbs IS NOT NULL
    GROUP BY source_file, bench
),
tiers AS (
    SELECT s.source_file, s.bench, list(DISTINCT ch.tier ORDER BY ch.tier) AS tiers
    FROM nccl_bench_summary s
    JOIN nccl_comms c ON c.run = s.run AND c.source_file = s.source_file
                     AND (s.n_ranks IS NULL OR c.nranks = s.n_ranks)
    JOIN nccl_channels ch ON ch.run = c.run AND ch.comm_id = c.comm_id
    WHERE s.run = $run AND c.comm_id IS NOT NULL AND ch.tier IS NOT NULL
    GROUP BY s.source_file, s.bench
)
SELECT s.source_file, s.bench, s.test, s.test_source, s.n_ranks AS ranks,
       coalesce(s.hosts, []) AS hosts, coalesce(s.devices, []) AS devices,
       s.avg_busbw_gbs, r.mean_bw AS mean_busbw_gbs, r.best.bw AS best_busbw_gbs,
       r.best.size AS best_size_bytes, r.best.in_place AS best_in_place,
       coalesce(t.tiers, []) AS tiers
FROM nccl_bench_summary s
LEFT JOIN rows r USING (source_file, bench)
LEFT JOIN tiers t USING (source_file, bench)
WHERE s.run = $run
ORDER BY s.source_file, s.bench
