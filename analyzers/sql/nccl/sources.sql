-- The report's nccl.sources: per kind of NCCL evidence of run $run (flight_recorder,
-- nccl_log, nccl_inspector, ...), how many files and how many distinct ranks they speak for.
-- Reads nccl_sources; writes nothing.
SELECT kind, count(*) AS files, count(DISTINCT rank) AS ranks
FROM nccl_sources
WHERE run = $run
GROUP BY kind
ORDER BY kind
