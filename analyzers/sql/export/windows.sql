-- The export's step windows (export/scope.sql's x_steps): rank, step, window start (ns,
-- the rank's own clock). No parameters.
SELECT rank, step, ws FROM x_steps ORDER BY step, rank
