-- The collective with sequence number $seq in group $pg: the lowest rank's entry, plus
-- every rank that holds it and in which state, and when the first rank enqueued it.
SELECT arg_min(profiling_name, rank) AS profiling_name, arg_min(op, rank) AS op,
       arg_min(input_sizes, rank) AS input_sizes, arg_min(output_sizes, rank) AS output_sizes,
       arg_min(input_dtypes, rank) AS input_dtypes, arg_min(state, rank) AS state,
       list(rank ORDER BY rank) AS ranks, list(state ORDER BY rank) AS states,
       min(time_created_ns) AS first_created_ns
FROM fr_entries
WHERE run = $run AND pg_name = $pg AND collective_seq_id = $seq AND NOT is_p2p
