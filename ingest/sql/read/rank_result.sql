-- What the reader reports about one parsed trace, in one row, after rank_tables.sql and
-- collectives.sql: the step source, the `ranks` row's summary (out_summary), how many
-- duration events landed in the timed tables (0: nothing to attribute) and the event
-- counts per category and phase. Reads out_step_source, out_summary, out_cpu_ops,
-- out_gpu_ops, out_gpu_annotations, category_counts, out_memory_events; writes nothing; no parameters.
SELECT
    (SELECT step_source FROM out_step_source) AS step_source,
    s.device, s.pid, s.trace_start_ns, s.trace_end_ns,
    (SELECT count(*) FROM out_cpu_ops) + (SELECT count(*) FROM out_gpu_ops)
        + (SELECT count(*) FROM out_gpu_annotations) AS n_timed,
    (SELECT list({'category': category, 'ph': ph, 'n': n} ORDER BY category, ph)
     FROM category_counts) AS category_counts,
    (SELECT count(*) FROM out_memory_events) AS n_memory_events
FROM out_summary s;
