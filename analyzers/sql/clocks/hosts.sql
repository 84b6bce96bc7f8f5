-- The hosts of run $run in the order of their lowest rank (host_no 0: the host of the
-- lowest rank, the reference clock), with their ranks. Parameters: $run.
SELECT coalesce(host, 'rank ' || rank) AS host, dense_rank() OVER (ORDER BY first_rank) - 1,
    list(rank ORDER BY rank) OVER (PARTITION BY coalesce(host, 'rank ' || rank))
FROM (SELECT host, rank, min(rank) OVER (PARTITION BY coalesce(host, 'rank ' || rank))
          AS first_rank FROM ranks WHERE run = $run)
QUALIFY row_number() OVER (PARTITION BY coalesce(host, 'rank ' || rank) ORDER BY rank) = 1
ORDER BY 2
