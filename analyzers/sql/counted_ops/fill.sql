-- Adds the counted ops of ranks $lo..$hi of run $run to counted_ops (created empty by
-- mfu/flops.sql), from the flops_claims macro (mfu/flops.sql). Every part of the macro reads
-- only those ranks and joins within a rank, so batches give the rows of the whole run.
-- Parameters: $run, $lo, $hi (rank numbers, both included).
INSERT INTO counted_ops SELECT $run, * FROM flops_claims($run, $lo, $hi);
