-- The attribution window (ns) of step $step on each rank of the list $ranks of run $run,
-- by rank, and where it starts on the aligned clock (docs/timeline.md, "Clocks"), in ns
-- after the earliest of them. Reads step_attribution, rank_clocks; writes nothing.
SELECT rank, window_ns, aligned - min(aligned) OVER () AS start_ns
FROM (
    SELECT a.rank, a.window_end_ns - a.window_start_ns AS window_ns,
        a.window_start_ns - k.offset_ns
            - CAST(k.drift_ppm * 1e-6 * (a.window_start_ns - k.ref_ns) AS BIGINT) AS aligned
    FROM step_attribution a JOIN rank_clocks k ON k.run = a.run AND k.rank = a.rank
    WHERE a.run = $run AND a.step = $step AND list_contains($ranks, a.rank)
)
ORDER BY rank
