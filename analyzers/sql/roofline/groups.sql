-- The roofline's rows of run $run at their finest grain (docs/roofline.md): one per op
-- kind and dtype, GEMMs per (batch, M, N, K) as well. Reads rf_kernels (roofline/
-- kernels.sql) and complete_steps. Parameter: $run. Per row:
--   kernels, time_ns, flops, bytes   sums over every rank's complete steps (flops: what
--                                    the hardware executed, bytes: the least traffic);
--   unsized_ns                       kernel time whose op's bytes are unknown;
--   untyped_elements, untyped_ns     of that, the least traffic in elements and the time of
--                                    the ops without `Input type` (bytes at the run's dtype:
--                                    analyzers/flops/roofline.py);
--   wf_time_ns, wf_model_flops       the waterfall's inputs: time of the kernels that are
--                                    not recompute, and model FLOPs summed over ranks of
--                                    each rank's mean per complete step;
--   rank_steps                       complete (rank, step) pairs of the run.
WITH steps AS (
    SELECT rank, count(*) AS n_steps FROM complete_steps WHERE run = $run GROUP BY rank
)
SELECT k.kind, k.dtype,
    CASE WHEN k.kind = 'gemm' THEN k.op_name END AS op_name,
    CASE WHEN k.kind = 'gemm' THEN k.b END AS b, CASE WHEN k.kind = 'gemm' THEN k.m END AS m,
    CASE WHEN k.kind = 'gemm' THEN k.n END AS n, CASE WHEN k.kind = 'gemm' THEN k.k END AS k,
    count(*) AS kernels, sum(k.dur_ns) AS time_ns, sum(k.flops ORDER BY k.flops) AS flops,
    sum(k.bytes ORDER BY k.bytes) AS bytes,
    coalesce(sum(k.dur_ns) FILTER (WHERE k.bytes IS NULL), 0) AS unsized_ns,
    coalesce(sum(k.untyped_elements ORDER BY k.untyped_elements), 0) AS untyped_elements,
    coalesce(sum(k.dur_ns) FILTER (WHERE k.untyped_elements IS NOT NULL), 0) AS untyped_ns,
    coalesce(sum(k.dur_ns) FILTER (WHERE NOT k.is_recompute), 0) AS wf_time_ns,
    sum(k.model_flops / s.n_steps ORDER BY k.model_flops / s.n_steps) AS wf_model_flops,
    (SELECT sum(n_steps) FROM steps) AS rank_steps
FROM rf_kernels k JOIN steps s ON s.rank = k.rank
GROUP BY ALL
ORDER BY time_ns DESC, kind, dtype NULLS FIRST, op_name NULLS FIRST, b, m, n, k;
