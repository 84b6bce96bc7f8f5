-- The point-to-point peers of every rank (pipeline sends and receives): a rank that
-- waited in the pipeline waited for these. Parameter: $run.
SELECT DISTINCT rank, peer_rank
FROM collectives
WHERE run = $run AND is_p2p AND peer_rank IS NOT NULL AND peer_rank <> rank
ORDER BY rank, peer_rank;
