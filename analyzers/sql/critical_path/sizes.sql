-- Upper bounds of the critical-path graph's size for run $run, so analyzers/critical_path/graph.py
-- can reserve its arrays once instead of joining the batches' parts: nodes (every GPU op
-- but a comm kernel, and every collective call: critical_path/graph.sql's cp_raw has at
-- most these) and windows (the GPU timeline's step windows). Parameters: $run.
SELECT
    (SELECT count(*) FROM gpu_ops WHERE run = $run AND kind <> 'comm')
        + (SELECT count(*) FROM collectives WHERE run = $run) AS nodes,
    (SELECT count(*) FROM step_attribution WHERE run = $run AND timeline = 'gpu') AS windows;
