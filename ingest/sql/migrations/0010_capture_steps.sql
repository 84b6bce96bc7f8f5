-- Schema version 10 (migration 10, ingest/schema.py): the view complete_steps leaves out a
-- step that captures a CUDA/HIP graph (step_attribution.window_source 'capture': its
-- launches are recorded into the graph, not run) where its rank has other complete steps
-- (docs/attribution.md, "Graph captures"). The same definition as
-- ingest/sql/schema/derived.sql; no parameters.
CREATE OR REPLACE VIEW complete_steps AS
SELECT run, rank, step FROM (
    SELECT run, rank, step, bounded,
        bool_or(bounded) OVER (PARTITION BY run, rank) AS rank_has_complete
    FROM (
        SELECT a.run, a.rank, a.step,
            a.has_successor AND NOT (coalesce(r.step_source, '') = 'optimizer_step'
                AND a.step = min(a.step) OVER (PARTITION BY a.run, a.rank))
                AND coalesce(a.window_source, '') <> 'capture' AS bounded
        FROM step_attribution a
        LEFT JOIN ranks r ON r.run = a.run AND r.rank = a.rank
    )
) WHERE bounded OR NOT rank_has_complete;
