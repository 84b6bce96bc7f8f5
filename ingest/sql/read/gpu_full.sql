-- Temp table gpu_full: the GPU ops of gpu_linked (rank_tables.sql), each in its step.
-- For a trace with graph replays that lost their launches (graph_fallback_spans not
-- empty): a GPU op linked to no runtime call that starts inside such a step's CPU
-- interval is taken as its graph's work (by time: the only evidence left). Without such
-- steps ingest/reader.py runs read/gpu_full_linked.sql instead (the same rows, without
-- the ASOF join: 26 -> 19 ms CPU on a 35 MB A100 trace). No parameters.
CREATE OR REPLACE TEMP TABLE gpu_full AS
SELECT g.* REPLACE (
    coalesce(g.step, CASE WHEN g.launch_op_id IS NULL AND g.start_ns < f.end_ns
                          THEN f.step END) AS step)
FROM gpu_linked g ASOF LEFT JOIN graph_fallback_spans f ON g.start_ns >= f.start_ns;
