-- The attribution window (ns) of step $step on each rank of the list $ranks of run $run,
-- by rank. Reads step_attribution; writes nothing.
SELECT rank, window_end_ns - window_start_ns AS window_ns FROM step_attribution
WHERE run = $run AND step = $step AND list_contains($ranks, rank)
ORDER BY rank
