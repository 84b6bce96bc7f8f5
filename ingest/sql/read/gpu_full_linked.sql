-- Temp table gpu_full for a trace without graph replays that lost their launches
-- (graph_fallback_spans empty, read/graph_fallback.sql): the GPU ops of gpu_linked
-- (rank_tables.sql) as they are, in the order read/gpu_full.sql's ASOF join leaves
-- them (by start). Reads gpu_linked; no parameters.
CREATE OR REPLACE TEMP TABLE gpu_full AS
SELECT * FROM gpu_linked ORDER BY start_ns, gpu_op_id;
