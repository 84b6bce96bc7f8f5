-- The CPU ops that ingest/nesting.py nests on their thread: those whose pid and tid are
-- numbers (the others: read/cpu_depth.sql). Reads cpu_raw (read/cpu_raw.sql); writes
-- nothing; no parameters.
SELECT op_id, pid, tid, start_ns, end_ns FROM cpu_raw
WHERE pid IS NOT NULL AND tid IS NOT NULL;
