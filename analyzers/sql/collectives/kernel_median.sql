-- Median compute-kernel duration of run $run (us). Reads gpu_ops. Parameter: $run.
SELECT median(dur_ns) / 1e3 FROM gpu_ops WHERE run = $run AND kind = 'compute';
