-- The first part of one Kineto trace's rank tables (ingest/reader.py runs it, then
-- ingest/nesting.py and read/cpu_depth.sql, then rank_tables.sql): the event counts and
-- the CPU ops' columns. Reads raw_events and meta (one row per element of traceEvents, in
-- file order, rowid = index; one row: base_ns, distributed_info, step_marker); writes
-- temp tables category_counts, cpu_raw, cpu_args. No parameters.

-- Event counts per category and phase (flows, instants and metadata included).
CREATE OR REPLACE TEMP TABLE category_counts AS
SELECT coalesce(cat, '') AS category, coalesce(ph, '') AS ph, count(*) AS n
FROM raw_events GROUP BY ALL;

-- ---------------------------------------------------------------- CPU side
-- Ids are the event's position in traceEvents (rowid of raw_events): stable per file.
-- Times: absolute ns (relative ts + baseTimeNanoseconds, or absolute ts as is).
CREATE OR REPLACE TEMP TABLE cpu_raw AS
WITH x AS (
    SELECT rowid AS idx, *, us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta) AS start_ns,
           greatest(coalesce(us_to_ns(dur), 0), 0) AS dur_ns
    FROM raw_events
    -- a CASE, not `cat IN (...)`, as in gpu_raw below: tested in the scan (39 -> 35 ms)
    WHERE ph = 'X' AND ts IS NOT NULL
      AND CASE cat WHEN 'cpu_op' THEN true WHEN 'Operator' THEN true
                   WHEN 'user_annotation' THEN true WHEN 'python_function' THEN true
                   WHEN 'cuda_runtime' THEN true WHEN 'Runtime' THEN true
                   WHEN 'cuda_driver' THEN true ELSE false END
)
SELECT
    idx AS op_id,
    leading_int(pid) AS pid,
    leading_int(tid) AS tid,
    name,
    cat AS category,
    start_ns,
    start_ns + dur_ns AS end_ns,
    dur_ns,
    TRY_CAST(args."External id" AS BIGINT) AS external_id,
    TRY_CAST(args.correlation AS BIGINT) AS correlation,
    TRY_CAST(args."Sequence number" AS BIGINT) AS sequence_number,
    TRY_CAST(args."Fwd thread id" AS BIGINT) AS fwd_thread_id,
    TRY_CAST(args."Record function id" AS BIGINT) AS record_function_id,
    args."Input Dims" AS input_dims,
    args."Input type" AS input_types,
    args."Concrete Inputs" AS concrete_inputs
FROM x;

-- Collective metadata lives in the args of record_param_comms (the keys collectives.sql
-- reads; it reads them through a LEFT JOIN, so an event without args needs no NULL).
CREATE OR REPLACE TEMP TABLE cpu_args AS
SELECT rowid AS op_id, comm_args(args) AS args FROM raw_events
WHERE ph = 'X' AND name = 'record_param_comms';
