-- The ranks and steps of run $run that `export --ranks/--steps` choose from (a range
-- given there is matched against these, never expanded: 0-2000000000 is two values here).
-- Parameters: $run.
SELECT coalesce((SELECT list(DISTINCT rank ORDER BY rank) FROM ranks WHERE run = $run),
                []::INTEGER[]) AS ranks,
       coalesce((SELECT list(DISTINCT step ORDER BY step) FROM step_attribution
                 WHERE run = $run), []::INTEGER[]) AS steps;
