-- The GPU of a trace without GPU ops whose kernels the CUPTI range profiler measured
-- instead: the pid of most of its `cuda_profiler_range` events (the GPU's pid, 'GPU 0';
-- ties: the one seen first). Those events are not stored (replayed kernels, no
-- timeline), but the rank ran on that GPU. Reads raw_events (read_events.sql); run only
-- for such a trace (reader._rank_tables). One row, or none.
SELECT CAST(leading_int(pid) AS INTEGER) AS device FROM raw_events
WHERE ph = 'X' AND cat = 'cuda_profiler_range' AND leading_int(pid) IS NOT NULL
GROUP BY leading_int(pid) ORDER BY count(*) DESC, min(rowid) LIMIT 1;
