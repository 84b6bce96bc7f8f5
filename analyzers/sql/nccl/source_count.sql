-- How many NCCL evidence files (nccl_sources) run $run has; reads nccl_sources, writes
-- nothing. Callers check first that the table exists (databases from before NCCL support).
SELECT count(*) AS n FROM nccl_sources WHERE run = $run
