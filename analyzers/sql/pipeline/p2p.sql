-- Point-to-point traffic per rank and peer over complete steps: the pipeline's shape.
-- Parameter: $run.
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
)
SELECT c.rank, c.peer_rank, c.collective, count(*) AS n_ops,
    count(DISTINCT c.step) AS n_steps,
    min(c.coll_id) FILTER (WHERE c.collective = 'send') IS NOT NULL AS sends
FROM collectives c JOIN complete s ON s.rank = c.rank AND s.step = c.step
WHERE c.run = $run AND c.is_p2p AND c.peer_rank IS NOT NULL
GROUP BY ALL ORDER BY c.rank, c.peer_rank, c.collective;
