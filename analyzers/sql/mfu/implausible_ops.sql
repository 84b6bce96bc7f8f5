-- Counted ops of run $run whose FLOPs (from their shapes, flops.sql) are more than their
-- kernels could have done at $max_rate FLOP/s in the time they ran: shapes that cannot
-- be right (docs/mfu.md, "Implausible shapes"). The worst first, at most $limit rows,
-- each with n, the number of such ops in the run. Reads counted_ops (the flops_claims
-- macro of mfu/flops.sql, analyzers/flops/counted_ops.py). Parameters: $run, $max_rate, $limit.
SELECT rank, step, op_id, name, model_flops + hardware_extra AS flops,
    kernel_ns / 1e6 AS kernel_ms,
    (model_flops + hardware_extra) / (kernel_ns / 1e9) AS flops_per_s,
    count(*) OVER () AS n
FROM counted_ops
WHERE run = $run AND NOT in_capture AND kernel_ns > 0 AND model_flops + hardware_extra > $max_rate * kernel_ns / 1e9
ORDER BY flops_per_s DESC, rank, op_id
LIMIT $limit
