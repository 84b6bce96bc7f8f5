-- The roofline analysis' pass over a run (docs/roofline.md): every compute kernel of a
-- complete step with the shaped op it belongs to, as the temp table macro
-- rf_batch(run_name, max_rate, lo, hi) over the ranks lo..hi (both included), which
-- roofline/kernels_create.sql and kernels_fill.sql gather into the temp table rf_kernels a
-- batch of ranks at a time (analyzers/flops/roofline.py): every join is within a rank, so the
-- rows are those of the whole run, in the memory of one batch. Reads gpu_ops, cpu_ops,
-- complete_steps, recompute_ops, the kernel_ops and model_flops macros (mfu/flops.sql, over counted_ops:
-- analyzers/flops/counted_ops.py) and roofline/macros.sql. max_rate: the most FLOP/s an op's
-- kernels may be credited with (analyzers/flops/bound.py; NULL: no bound).
--
-- A kernel belongs to the nearest of its CPU op (mfu/flops.sql's kernel_ops: the op with its
-- External id, else the op enclosing its launch call), that op's
-- parent and grandparent that is a shaped op of a known kind (rf_kind): a GEMM, attention
-- or convolution op whose FLOPs mfu/flops.sql counts, or an elementwise / normalization op
-- with `Input Dims`. An op's FLOPs and bytes are shared among its kernels in proportion to
-- their time. Bytes: every tensor input read once plus the output written once (GEMM
-- M x N, attention forward the query's size, backward the query's, key's and value's,
-- elementwise the largest input, copy_ none beyond its inputs, fill_ / zero_ only the
-- tensor written) - the least traffic the op can have.
CREATE OR REPLACE TEMP MACRO rf_batch(run_name, max_rate, lo, hi) AS TABLE
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = run_name AND rank BETWEEN lo AND hi
), kernels AS (
    SELECT g.rank, g.step, g.gpu_op_id, g.name AS kernel, g.dur_ns, g.op_id AS cpu_op_id,
        g.launch_op_id
    FROM kernel_ops(run_name, lo, hi) g JOIN complete c ON c.rank = g.rank AND c.step = g.step
    WHERE g.kind = 'compute' AND g.dur_ns > 0
), flops AS (
    SELECT rank, op_id, model_flops + hardware_extra AS exec_flops,
           CASE WHEN is_recompute THEN 0 ELSE model_flops END AS model_flops, is_recompute
    FROM model_flops(run_name, max_rate) WHERE rank BETWEEN lo AND hi
), shaped AS (
    SELECT o.rank, o.op_id, o.name, rf_kind(o.name) AS kind,
        TRY_CAST(o.input_dims AS BIGINT[][]) AS dims,
        TRY_CAST(o.input_types AS VARCHAR[]) AS types,
        f.exec_flops, f.model_flops, coalesce(f.is_recompute, r.op_id IS NOT NULL) AS is_recompute
    FROM cpu_ops o
    LEFT JOIN flops f ON f.rank = o.rank AND f.op_id = o.op_id
    LEFT JOIN recompute_ops r ON r.run = run_name AND r.rank BETWEEN lo AND hi
        AND r.rank = o.rank AND r.op_id = o.op_id
    WHERE o.run = run_name AND o.rank BETWEEN lo AND hi
      AND o.input_dims IS NOT NULL AND rf_kind(o.name) IS NOT NULL
      AND (rf_kind(o.name) IN ('elementwise', 'normalization') OR f.exec_flops IS NOT NULL)
), chain AS (
    SELECT k.*, o1.parent_id AS p1, o2.parent_id AS p2
    FROM kernels k
    LEFT JOIN cpu_ops o1 ON o1.run = run_name AND o1.rank BETWEEN lo AND hi
        AND o1.rank = k.rank AND o1.op_id = k.cpu_op_id
    LEFT JOIN cpu_ops o2 ON o2.run = run_name AND o2.rank BETWEEN lo AND hi
        AND o2.rank = k.rank AND o2.op_id = o1.parent_id
), assigned AS (
    SELECT c.rank, c.step, c.gpu_op_id, c.kernel, c.dur_ns, c.launch_op_id,
        coalesce(s0.op_id, s1.op_id, s2.op_id) AS op_id
    FROM chain c
    LEFT JOIN shaped s0 ON s0.rank = c.rank AND s0.op_id = c.cpu_op_id
    LEFT JOIN shaped s1 ON s1.rank = c.rank AND s1.op_id = c.p1
    LEFT JOIN shaped s2 ON s2.rank = c.rank AND s2.op_id = c.p2
), sized AS (
    SELECT s.*, rf_dtype(s.types) AS dtype,
        list_sum(list_transform(range(1, len(s.dims) + 1), lambda i:
            coalesce(rf_numel(s.dims[i]) * rf_elem_bytes(s.types[i]), 0))) AS in_bytes,
        rf_elem_bytes(list_filter(s.types, lambda t: rf_elem_bytes(t) IS NOT NULL)[1])
            AS out_elem,
        list_max(list_transform(s.dims, lambda d: rf_numel(d))) AS max_numel,
        -- GEMM (batch, M, N, K) as mfu/flops.sql reads them
        CASE s.name
            WHEN 'aten::mm' THEN [1, s.dims[1][1], s.dims[2][2], s.dims[1][2]]
            WHEN 'aten::addmm' THEN [1, s.dims[2][1], s.dims[3][2], s.dims[2][2]]
            WHEN 'aten::bmm' THEN [s.dims[1][1], s.dims[1][2], s.dims[2][3], s.dims[1][3]]
            WHEN 'aten::baddbmm' THEN [s.dims[2][1], s.dims[2][2], s.dims[3][3], s.dims[2][3]]
            WHEN 'aten::linear' THEN [1, rf_numel(s.dims[1][1:-2]), s.dims[2][1], s.dims[1][-1]]
            WHEN 'aten::matmul' THEN CASE len(s.dims[1])
                WHEN 2 THEN [1, s.dims[1][1], s.dims[2][2], s.dims[1][2]]
                WHEN 3 THEN [1, s.dims[1][1] * s.dims[1][2], s.dims[2][2], s.dims[1][3]] END
        END AS bmnk
    FROM shaped s
), counted AS (
    SELECT *,
        list_sum(list_transform(dims, lambda d: rf_numel(d))) AS in_numel,
        CASE
            WHEN kind = 'gemm' THEN bmnk[1] * bmnk[2] * bmnk[3]
            WHEN kind = 'attention' AND name LIKE '%backward'
                THEN rf_numel(dims[2]) + rf_numel(dims[3]) + rf_numel(dims[4])
            WHEN kind = 'attention' THEN rf_numel(dims[1])
            WHEN kind = 'conv' AND name = 'aten::convolution'
                THEN exec_flops / (2.0 * rf_numel(dims[2][2:]))
            WHEN kind = 'conv' THEN rf_numel(dims[2]) + rf_numel(dims[3])
            WHEN name = 'aten::copy_' THEN 0
            ELSE max_numel END AS out_numel
    FROM sized
), ops AS (
    SELECT rank, op_id, name, kind, dtype, exec_flops, model_flops, is_recompute,
        bmnk[1] AS b, bmnk[2] AS m, bmnk[3] AS n, bmnk[4] AS k,
        -- no `Input type` (torch before 1.10, the simulated H100 sets): the bytes are not
        -- known here; `elements` is the least traffic in elements, which the roofline
        -- (analyzers/flops/roofline.py) turns into bytes at the run's dtype, as it gives
        -- such GEMM / attention / convolution rows that dtype (docs/roofline.md)
        CASE WHEN types IS NULL THEN NULL
             WHEN name IN ('aten::fill_', 'aten::zero_') THEN rf_numel(dims[1]) * out_elem
             ELSE in_bytes + coalesce(out_elem * out_numel, 0) END AS bytes,
        CASE WHEN name IN ('aten::fill_', 'aten::zero_') THEN rf_numel(dims[1])
             ELSE in_numel + coalesce(out_numel, 0) END AS elements
    FROM counted
), per_kernel AS (
    SELECT a.*, sum(a.dur_ns) OVER (PARTITION BY a.rank, a.op_id) AS op_ns
    FROM assigned a
)
SELECT k.rank, k.step, k.gpu_op_id, k.kernel, k.dur_ns, k.op_id,
    coalesce(o.kind, 'unshaped') AS kind, o.name AS op_name, o.dtype, o.b, o.m, o.n, o.k,
    r.op_id IS NOT NULL AS is_recompute,
    coalesce(o.exec_flops, 0) * k.dur_ns / k.op_ns AS flops,
    coalesce(o.model_flops, 0) * k.dur_ns / k.op_ns AS model_flops,
    CASE WHEN o.bytes IS NOT NULL THEN o.bytes * k.dur_ns / k.op_ns END AS bytes,
    CASE WHEN o.bytes IS NULL AND o.elements IS NOT NULL
         THEN o.elements * k.dur_ns / k.op_ns END AS untyped_elements
FROM per_kernel k
LEFT JOIN ops o ON o.rank = k.rank AND o.op_id = k.op_id
-- recompute kernels (their launch is a recompute op) count for the roofline, not for the
-- waterfall, whose compute time excludes them (docs/attribution.md)
LEFT JOIN recompute_ops r ON r.run = run_name AND r.rank BETWEEN lo AND hi
    AND r.rank = k.rank AND r.op_id = k.launch_op_id;
