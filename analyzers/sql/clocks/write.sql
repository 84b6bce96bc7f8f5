-- Replace run $run's rows of clock_offsets with $rows (docs/schema.md, "clock_offsets").
-- Parameters: $run, $rows ([{host, rank, offset_ns, drift_ppm, ref_ns, residual_ns,
-- n_matched, aligned, note}]).
DELETE FROM clock_offsets WHERE run = $run;
INSERT INTO clock_offsets BY NAME
SELECT $run AS run, * FROM (SELECT unnest($rows, recursive := true));
