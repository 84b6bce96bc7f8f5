-- The temp table rf_kernels (roofline/kernels.sql), empty: rf_batch over no rank gives
-- the columns their types; roofline/kernels_fill.sql adds the ranks. Parameters: $run,
-- $max_rate (no row is read).
CREATE OR REPLACE TEMP TABLE rf_kernels AS FROM rf_batch($run, $max_rate, 1, 0);
