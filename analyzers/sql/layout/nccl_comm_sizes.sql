-- How many communicators of each size the NCCL_DEBUG logs of run $run hold (the layout's
-- note for a run without profiler traces: the logs give sizes, never what a group is for).
-- Reads nccl_comms. Parameter: $run.
SELECT nranks, count(DISTINCT comm_id) AS n
FROM nccl_comms WHERE run = $run AND comm_id IS NOT NULL AND nranks IS NOT NULL
GROUP BY nranks ORDER BY nranks DESC;
