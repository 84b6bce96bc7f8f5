-- Schema version 9 (migration 9, ingest/schema.py): the view complete_steps counts a step
-- only when it has both ends (docs/attribution.md, "Complete steps"): with Optimizer.step#
-- as the step source, a rank's first step runs from the start of the trace and has no
-- start boundary. The same definition as ingest/sql/schema/derived.sql; no parameters.
CREATE OR REPLACE VIEW complete_steps AS
SELECT run, rank, step FROM (
    SELECT run, rank, step, bounded,
        bool_or(bounded) OVER (PARTITION BY run, rank) AS rank_has_complete
    FROM (
        SELECT a.run, a.rank, a.step,
            a.has_successor AND NOT (coalesce(r.step_source, '') = 'optimizer_step'
                AND a.step = min(a.step) OVER (PARTITION BY a.run, a.rank)) AS bounded
        FROM step_attribution a
        LEFT JOIN ranks r ON r.run = a.run AND r.rank = a.rank
    )
) WHERE bounded OR NOT rank_has_complete;
