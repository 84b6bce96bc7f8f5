-- The element type of run $run's matmul / attention / convolution work (docs/mfu.md,
-- "Which peak"), two ways; one row per (source, dtype) with its weight:
--   ops      the counted ops of mfu/flops.sql, by the first tensor type of their
--            `Input type` (record_shapes), weighted by their model FLOPs;
--   kernels  GEMM / attention / convolution kernels by the type in their name (bf16,
--            h884/h1688 = fp16, s1688/tf32 = TF32, sgemm = fp32, e4m3 = fp8), weighted by
--            their GPU time.
-- Only complete steps count.
WITH f AS (SELECT * FROM model_flops($run, $max_rate)),
complete AS (SELECT rank, step FROM complete_steps WHERE run = $run),
ops AS (
    SELECT f.model_flops AS weight,
        list_filter(list_transform(TRY_CAST(o.input_types AS VARCHAR[]), lambda t:
            CASE
                WHEN regexp_matches(lower(t), 'float8') THEN 'fp8'
                WHEN regexp_matches(lower(t), 'bfloat16') THEN 'bf16'
                WHEN regexp_matches(lower(t), 'half|float16') THEN 'fp16'
                WHEN lower(t) IN ('float', 'c10::float', 'float32') THEN 'fp32'
                WHEN lower(t) IN ('double', 'c10::double', 'float64') THEN 'fp64'
            END), lambda d: d IS NOT NULL)[1] AS dtype
    FROM f
    JOIN complete c ON c.rank = f.rank AND c.step = f.step
    JOIN cpu_ops o ON o.run = $run AND o.rank = f.rank AND o.op_id = f.op_id
    WHERE NOT f.is_recompute
), kernels AS (
    SELECT g.dur_ns AS weight,
        CASE
            WHEN regexp_matches(lower(g.name), 'e4m3|e5m2|fp8') THEN 'fp8'
            WHEN regexp_matches(lower(g.name), 'bf16|bfloat16') THEN 'bf16'
            WHEN regexp_matches(lower(g.name), 'tf32|s1688gemm|s16816gemm|s1688|s16816') THEN 'tf32'
            WHEN regexp_matches(lower(g.name), 'fp16|f16f16|h884|h1688|h16816|hgemm|half')
                THEN 'fp16'
            WHEN regexp_matches(lower(g.name), 'sgemm|f32f32|_f32_|fp32|scudnn|sm\d+_f32') THEN 'fp32'
        END AS dtype
    FROM gpu_ops g
    JOIN complete c ON c.rank = g.rank AND c.step = g.step
    WHERE g.run = $run AND g.kind = 'compute'
      AND regexp_matches(lower(g.name), 'gemm|xmma|cutlass|fmha|flash|attention|matmul|conv')
)
SELECT 'ops' AS source, dtype, sum(weight) AS weight FROM ops
WHERE dtype IS NOT NULL GROUP BY dtype
UNION ALL
SELECT 'kernels', dtype, sum(weight) FROM kernels
WHERE dtype IS NOT NULL GROUP BY dtype
ORDER BY source, weight DESC
