-- The ranks of run $run in rank order with their trace's event count, from which
-- analyzers/breakdown/attribution.py cuts the batches of ranks that attribution/attribution.sql
-- works on. Reads ranks. Parameters: $run.
SELECT rank, coalesce(n_events, 0) AS n_events
FROM ranks WHERE run = $run
ORDER BY rank;
