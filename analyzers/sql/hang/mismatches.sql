-- Desync: the same (group, collective sequence number) issued differently across ranks.
-- Ops inside one coalesced launch share a sequence number, so each rank's ops for a
-- number are compared as one ordered list. Sizes are compared only for ops whose tensor
-- shapes must agree on every rank (all_to_all, gather, scatter legitimately differ).
WITH per_rank AS (
    SELECT pg_name, any_value(pg_desc) AS pg_desc, collective_seq_id AS seq, rank,
           list(op ORDER BY op_id, record_id) AS ops,
           list(input_dtypes ORDER BY op_id, record_id) AS dtypes,
           list(input_sizes ORDER BY op_id, record_id) AS sizes,
           bool_and(op IN ('all_reduce', 'allreduce', 'broadcast', 'reduce',
                           '_all_gather_base', 'all_gather_into_tensor',
                           '_reduce_scatter_base', 'reduce_scatter_tensor', 'barrier'))
               AS same_shape_ops
    FROM fr_entries
    WHERE run = $run AND NOT is_p2p AND collective_seq_id IS NOT NULL
    GROUP BY pg_name, collective_seq_id, rank
)
SELECT pg_name, any_value(pg_desc) AS pg_desc, seq,
       count(DISTINCT ops) > 1 AS op_differs,
       count(DISTINCT dtypes) > 1 AS dtype_differs,
       bool_and(same_shape_ops) AND count(DISTINCT sizes) > 1 AS sizes_differ,
       list(rank ORDER BY rank) AS ranks, list(ops ORDER BY rank) AS ops,
       list(sizes ORDER BY rank) AS sizes, list(dtypes ORDER BY rank) AS dtypes
FROM per_rank
GROUP BY pg_name, seq
HAVING count(DISTINCT ops) > 1 OR count(DISTINCT dtypes) > 1
    OR (bool_and(same_shape_ops) AND count(DISTINCT sizes) > 1)
ORDER BY pg_name, seq
