-- Every NCCL version any evidence file of run $run names (a source may list several,
-- comma separated), sorted. Reads nccl_sources; writes nothing.
SELECT DISTINCT v FROM (
    SELECT unnest(string_split(nccl_version, ', ')) AS v FROM nccl_sources
    WHERE run = $run AND nccl_version IS NOT NULL)
ORDER BY v
