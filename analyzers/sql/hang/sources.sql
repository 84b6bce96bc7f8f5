-- The Flight Recorder dumps of run $run: the ranks that left one, and the distinct format
-- and NCCL versions they name (one row; empty lists without dumps). Reads nccl_sources;
-- writes nothing.
SELECT list(rank ORDER BY rank) AS ranks, list(DISTINCT version) AS versions,
       list(DISTINCT nccl_version) AS nccl_versions
FROM nccl_sources
WHERE run = $run AND kind = 'flight_recorder'
