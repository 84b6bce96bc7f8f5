-- The last part of one Kineto trace's rank tables, after rank_tables.sql and
-- read/gpu_full.sql (or read/gpu_full_linked.sql): the GPU ops, GPU annotations, steps,
-- threads, process groups and the summary row. Reads raw_events, meta, gpu_full,
-- step_spans, graph_launch_steps, out_cpu_ops; writes temp tables out_gpu_ops,
-- out_gpu_annotations, out_steps, out_threads, out_process_groups, out_summary.
-- No parameters.

CREATE OR REPLACE TEMP TABLE out_gpu_ops AS
SELECT gpu_op_id, device, stream, name, kind, category, start_ns, end_ns, dur_ns, correlation,
       external_id, bytes, launch_op_id, cpu_op_id, step, graph_id, graph_node_id
FROM gpu_full;

CREATE OR REPLACE TEMP TABLE out_gpu_annotations AS
SELECT
    CAST(leading_int(pid) AS INTEGER) AS device,
    leading_int(tid) AS stream,
    name,
    us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta) AS start_ns,
    us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta)
        + greatest(coalesce(us_to_ns(dur), 0), 0) AS end_ns,
    TRY_CAST(args."External id" AS BIGINT) AS external_id
FROM raw_events WHERE ph = 'X' AND ts IS NOT NULL AND cat = 'gpu_user_annotation';

CREATE OR REPLACE TEMP TABLE out_steps AS
SELECT s.step, s.tid, s.start_ns, s.end_ns, s.end_ns - s.start_ns AS dur_ns,
       count(g.gpu_op_id) AS n_gpu_ops,
       min(g.start_ns) AS gpu_start_ns, max(g.end_ns) AS gpu_end_ns,
       CAST(coalesce(any_value(gs.graph_launches), 0) AS INTEGER) AS graph_launches,
       CAST(coalesce(any_value(gs.unlinked), 0) AS INTEGER) AS graph_launches_unlinked
FROM step_spans s LEFT JOIN gpu_full g ON g.step = s.step
LEFT JOIN graph_launch_steps gs ON gs.step = s.step
GROUP BY s.step, s.tid, s.start_ns, s.end_ns;

CREATE OR REPLACE TEMP TABLE out_threads AS
SELECT DISTINCT leading_int(pid) AS pid, leading_int(tid) AS tid,
       CAST(args.name AS VARCHAR) AS thread_name
FROM raw_events WHERE ph = 'M' AND name = 'thread_name';

-- ---------------------------------------------------------------- process groups
CREATE OR REPLACE TEMP TABLE out_process_groups AS
SELECT
    CAST(pg ->> 'pg_name' AS VARCHAR) AS pg_name,
    CAST(pg ->> 'pg_desc' AS VARCHAR) AS pg_desc,
    CAST(regexp_extract_all(CAST(pg -> 'ranks' AS VARCHAR), '-?\d+') AS INTEGER[]) AS ranks,
    TRY_CAST(pg ->> 'pg_size' AS INTEGER) AS size,
    CAST(pg ->> 'backend_config' AS VARCHAR) AS backend,
    false AS ranks_truncated,
    'pg_config' AS source
FROM (SELECT unnest(CAST(distributed_info -> '$.pg_config' AS JSON[])) AS pg FROM meta
      WHERE json_type(distributed_info -> '$.pg_config') = 'ARRAY');

-- ---------------------------------------------------------------- summary
-- One row the loader needs for the `ranks` table, so it never reads the op tables back:
-- the most frequent device and pid (ties: the one seen first) and the CPU time span.
-- (Without GPU ops, read/range_device.sql may find the device.)
CREATE OR REPLACE TEMP TABLE out_summary AS
SELECT
    (SELECT device FROM out_gpu_ops WHERE device IS NOT NULL
     GROUP BY device ORDER BY count(*) DESC, min(gpu_op_id) LIMIT 1) AS device,
    (SELECT pid FROM out_cpu_ops WHERE pid IS NOT NULL
     GROUP BY pid ORDER BY count(*) DESC, min(op_id) LIMIT 1) AS pid,
    (SELECT min(start_ns) FROM out_cpu_ops) AS trace_start_ns,
    (SELECT max(end_ns) FROM out_cpu_ops) AS trace_end_ns;
