-- all_to_all traffic per rank of run $run, per complete step (docs/alltoall.md): bytes
-- sent and received, tokens (rows of the split sizes) received, and received / the mean
-- rank's. Reads a2a_calls (alltoall/calls.sql), complete_steps. Parameter: $run.
WITH steps AS (
    SELECT rank, count(*) AS n FROM complete_steps WHERE run = $run GROUP BY rank
), per_rank AS (
    SELECT c.rank, sum(c.sent) / any_value(s.n) AS sent, sum(c.received) / any_value(s.n)
        AS received,
        CASE WHEN bool_and(c.tokens_received IS NOT NULL)
             THEN sum(c.tokens_received) / any_value(s.n) END AS tokens_received
    FROM a2a_calls c JOIN steps s USING (rank) GROUP BY c.rank
)
SELECT rank, sent, received, tokens_received,
    received / nullif(avg(received) OVER (), 0) AS received_vs_mean
FROM per_rank ORDER BY rank;
