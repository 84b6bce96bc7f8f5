-- Adds the kernels of ranks $lo..$hi of run $run to rf_kernels (roofline/kernels.sql).
-- Parameters: $run, $max_rate, $lo, $hi.
INSERT INTO rf_kernels FROM rf_batch($run, $max_rate, $lo, $hi);
