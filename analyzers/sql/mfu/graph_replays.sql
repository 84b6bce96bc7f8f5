-- CUDA/HIP graph replays of run $run and the graph captures beside them (docs/mfu.md,
-- "Graph replays"): a replay's ops are recorded (with their shapes) only while the graph
-- is captured, and no trace yet names a graph id on both a capture and a launch, so the
-- replays' FLOPs are not counted; the MFU headline says so with these counts.
-- Reads cpu_ops (runtime calls). Parameter: $run.
SELECT
    count(*) FILTER (WHERE regexp_matches(name, '^(cuda|hip)GraphLaunch')) AS launches,
    count(*) FILTER (WHERE regexp_matches(name, '^(cuda|hip)StreamBeginCapture')) AS captures
FROM cpu_ops
WHERE run = $run AND category IN ('cuda_runtime', 'Runtime');
