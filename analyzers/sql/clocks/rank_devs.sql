-- Ranks whose ends differ from their host's (clocks/ends.sql) by more than $min_ns in
-- the median over their instances: a rank whose clock is not its host's. Returns
-- (rank, host, median deviation in ns, instances). Parameters: $run, $min_ns.
WITH hosts AS (
    SELECT coalesce(host, 'rank ' || rank) AS host, rank FROM ranks WHERE run = $run
), dev AS (
    SELECT r.rank, h.host, r.e - e.e AS d
    FROM clk_rank_ends r JOIN hosts h USING (rank)
    JOIN clk_ends e ON e.inst = r.inst AND e.host = h.host AND e.n_ranks > 1
)
SELECT rank, host, CAST(median(d) AS BIGINT) AS dev, count(*) AS n FROM dev
GROUP BY rank, host HAVING abs(median(d)) > $min_ns ORDER BY rank
