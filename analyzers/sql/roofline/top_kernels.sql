-- The kernels of run $run with the most time in complete steps, with the FLOPs and bytes
-- of their ops (shared in proportion to time among an op's kernels; docs/roofline.md).
-- Reads rf_kernels (roofline/kernels.sql). Parameters: $limit (rows).
SELECT kernel, kind, dtype, count(*) AS kernels, sum(dur_ns) AS time_ns,
    sum(flops ORDER BY flops) AS flops, sum(bytes ORDER BY bytes) AS bytes,
    coalesce(sum(dur_ns) FILTER (WHERE bytes IS NULL), 0) AS unsized_ns,
    coalesce(sum(untyped_elements ORDER BY untyped_elements), 0) AS untyped_elements,
    coalesce(sum(dur_ns) FILTER (WHERE untyped_elements IS NOT NULL), 0) AS untyped_ns
FROM rf_kernels
WHERE kind <> 'unshaped'
GROUP BY kernel, kind, dtype
ORDER BY time_ns DESC, kernel, kind, dtype NULLS FIRST
LIMIT $limit;
