-- Whether the trace has steps whose graph replays lost their launches (rows in
-- graph_fallback_spans, rank_tables.sql): ingest/reader.py then builds gpu_full with
-- read/gpu_full.sql, else with read/gpu_full_linked.sql. Writes nothing; no parameters.
SELECT EXISTS (SELECT 1 FROM graph_fallback_spans);
