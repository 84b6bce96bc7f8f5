-- When run $run's traces start: the earliest event of any rank (epoch ns; NULL without
-- ranks). Reads ranks; writes nothing.
SELECT min(trace_start_ns) AS trace_start_ns FROM ranks WHERE run = $run
