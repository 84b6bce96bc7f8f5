-- Temp table gpu_full for a trace without graph replays that lost their launches
-- (graph_fallback_spans empty, read/graph_fallback.sql): the GPU ops of gpu_linked
-- (rank_tables.sql) as they are, stored by start (the order read/gpu_full.sql's ASOF
-- join leaves them in on one thread; on two, `main` stored them in an order that changed
-- from run to run). Reads gpu_linked; no parameters.
CREATE OR REPLACE TEMP TABLE gpu_full AS
SELECT * FROM gpu_linked ORDER BY start_ns, gpu_op_id;
