-- The paths given to `stepscope ingest` for run $run (runs.sources, a JSON list), where
-- the planner looks for the run's model.json. Reads runs. Parameter: $run.
SELECT sources FROM runs WHERE run = $run;
