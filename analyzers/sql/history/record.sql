-- Records one night: inserts the history row of ($job, $run), replacing the row of a re-run
-- of the same night. Writes history; one parameter per column (analyzers.nightly.history.HistoryRow,
-- whose fields are exactly these columns: tests/test_nightly.py checks it).
INSERT OR REPLACE INTO history (
    job, run, trace_start, ingested_at, status, checks, checks_failed, world_size, n_ranks,
    device, step_time_ms, mfu, hfu, compute_ms, recompute_ms, exposed_comm_ms,
    straggler_wait_ms, bubble_ms, memory_ms, idle_ms, largest_loss, largest_loss_ms,
    baseline, mfu_delta_points, step_time_delta_ms, top_cause
) VALUES (
    $job, $run, $trace_start, $ingested_at, $status, $checks, $checks_failed, $world_size,
    $n_ranks, $device, $step_time_ms, $mfu, $hfu, $compute_ms, $recompute_ms,
    $exposed_comm_ms, $straggler_wait_ms, $bubble_ms, $memory_ms, $idle_ms, $largest_loss,
    $largest_loss_ms, $baseline, $mfu_delta_points, $step_time_delta_ms, $top_cause
)
