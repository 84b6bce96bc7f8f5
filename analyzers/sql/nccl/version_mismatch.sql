-- One row when the processes of run $run run more than one NCCL version (build suffix after
-- '+' ignored): the versions and the hosts. Reads nccl_processes; writes nothing.
SELECT list(DISTINCT split_part(nccl_version, '+', 1)) AS versions,
       list(DISTINCT host) AS hosts
FROM nccl_processes
WHERE run = $run AND nccl_version IS NOT NULL
HAVING count(DISTINCT split_part(nccl_version, '+', 1)) > 1
