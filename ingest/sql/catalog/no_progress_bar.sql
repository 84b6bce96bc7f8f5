-- Turns DuckDB's progress bar off for this connection (ingest.db.connect): it would draw
-- on stderr under a long query (a report capped in memory, a big attribution), and
-- stepscope's output is its own lines only. Reads nothing; writes the setting only; no
-- parameters.
SET enable_progress_bar = false
