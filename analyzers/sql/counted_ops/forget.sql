-- Removes run $run's rows from counted_ops (analyzers/flops/counted_ops.py, once its last user
-- is done; the table stays, empty). Parameter: $run.
DELETE FROM counted_ops WHERE run = $run;
