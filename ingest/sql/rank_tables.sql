-- Turns one Kineto trace into the rank tables `out_*`. Inputs, made by ingest/reader.py:
--   raw_events: one row per element of traceEvents, in file order (rowid = index);
--   meta:       one row: base_ns, distributed_info (JSON).
-- Rank-agnostic: the loader adds `run` and `rank` when it inserts.
-- Statements run in order; each one depends only on those above it.

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
    WHERE ph = 'X' AND ts IS NOT NULL AND cat IN (
        'cpu_op', 'Operator', 'user_annotation', 'python_function',
        'cuda_runtime', 'Runtime', 'cuda_driver')
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

-- Collective metadata lives in the args of record_param_comms.
CREATE OR REPLACE TEMP TABLE cpu_args AS
SELECT rowid AS op_id, args FROM raw_events
WHERE ph = 'X' AND name = 'record_param_comms';

-- Nesting by time containment on each thread: depth = ops open when the op starts =
-- ops started before it (enclosing first at equal starts) - ops ended at or before its
-- start (its own end excluded).
CREATE OR REPLACE TEMP TABLE cpu_depth AS
WITH started AS (
    SELECT op_id, pid, tid, start_ns, end_ns,
        row_number() OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns DESC, op_id)
            AS n_started
    FROM cpu_raw
), ended AS (
    SELECT pid, tid, end_ns,
        row_number() OVER (PARTITION BY pid, tid ORDER BY end_ns) AS n_ended
    FROM cpu_raw
)
SELECT s.op_id, s.pid, s.tid, s.start_ns, s.end_ns,
    CAST(greatest(0, s.n_started - 1 - coalesce(e.n_ended, 0)
                     + CASE WHEN s.end_ns = s.start_ns THEN 1 ELSE 0 END) AS INTEGER) AS depth
FROM started s ASOF LEFT JOIN ended e
  ON s.pid = e.pid AND s.tid = e.tid AND s.start_ns >= e.end_ns;

-- Parent: latest-starting span one level up on the same thread. A span that only
-- partially overlaps that one (gloo send/recv) takes the span two levels up instead.
CREATE OR REPLACE TEMP TABLE cpu_parent AS
SELECT c.op_id, c.pid, c.tid, c.start_ns, c.end_ns, c.depth, p.op_id AS p1, p.end_ns AS p1_end
FROM cpu_depth c ASOF LEFT JOIN cpu_depth p
  ON c.pid = p.pid AND c.tid = p.tid AND c.depth - 1 = p.depth AND c.start_ns >= p.start_ns;

CREATE OR REPLACE TEMP TABLE cpu_parent_fix AS
SELECT c.op_id, p.op_id AS p2, p.end_ns AS p2_end
FROM (SELECT * FROM cpu_parent WHERE p1_end < end_ns) c ASOF LEFT JOIN cpu_depth p
  ON c.pid = p.pid AND c.tid = p.tid AND c.depth - 2 = p.depth AND c.start_ns >= p.start_ns;

CREATE OR REPLACE TEMP TABLE step_spans AS
SELECT
    CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) AS step,
    pid, tid, start_ns, end_ns, op_id, dur_ns
FROM cpu_raw
WHERE name LIKE 'ProfilerStep#%' AND regexp_matches(name, '^ProfilerStep#\d+$')
QUALIFY row_number() OVER (PARTITION BY step ORDER BY dur_ns DESC) = 1;

CREATE OR REPLACE TEMP TABLE cpu_nest AS
SELECT c.op_id, c.depth,
    CASE WHEN f.op_id IS NULL OR f.p2_end IS NULL OR f.p2_end < c.end_ns THEN c.p1
         ELSE f.p2 END AS parent_id,
    CASE WHEN c.start_ns < s.end_ns THEN s.step END AS step
FROM cpu_parent c
LEFT JOIN cpu_parent_fix f USING (op_id)
ASOF LEFT JOIN step_spans s ON c.start_ns >= s.start_ns;

CREATE OR REPLACE TEMP TABLE out_cpu_ops AS
SELECT r.op_id, r.pid, r.tid, r.name, r.category, r.start_ns, r.end_ns, r.dur_ns,
       r.external_id, r.correlation, r.sequence_number, r.fwd_thread_id,
       r.record_function_id, r.input_dims, r.input_types, r.concrete_inputs,
       n.parent_id, n.depth, n.step
FROM cpu_raw r JOIN cpu_nest n USING (op_id);

-- ---------------------------------------------------------------- GPU side
CREATE OR REPLACE TEMP TABLE gpu_raw AS
WITH x AS (
    SELECT rowid AS idx, *, us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta) AS start_ns,
           greatest(coalesce(us_to_ns(dur), 0), 0) AS dur_ns
    FROM raw_events
    WHERE ph = 'X' AND ts IS NOT NULL
      AND cat IN ('kernel', 'Kernel', 'gpu_memcpy', 'Memcpy', 'gpu_memset', 'Memset')
)
SELECT
    idx AS gpu_op_id,
    CAST(coalesce(TRY_CAST(args.device AS INTEGER), leading_int(pid)) AS INTEGER) AS device,
    coalesce(TRY_CAST(args.stream AS BIGINT), leading_int(tid)) AS stream,
    name,
    CASE
        WHEN cat IN ('gpu_memcpy', 'Memcpy') THEN 'memcpy'
        WHEN cat IN ('gpu_memset', 'Memset') THEN 'memset'
        WHEN name ILIKE 'nccl%' OR name ILIKE 'void nccl%' OR args."Collective name" IS NOT NULL
            THEN 'comm'
        ELSE 'compute'
    END AS kind,
    cat AS category,
    start_ns,
    start_ns + dur_ns AS end_ns,
    dur_ns,
    TRY_CAST(args.correlation AS BIGINT) AS correlation,
    TRY_CAST(args."External id" AS BIGINT) AS external_id,
    TRY_CAST(args.bytes AS BIGINT) AS bytes,
    CASE WHEN name ILIKE 'nccl%' OR name ILIKE 'void nccl%' OR args."Collective name" IS NOT NULL
         THEN args END AS args
FROM x;

CREATE OR REPLACE TEMP TABLE launches AS
SELECT correlation, op_id, step FROM out_cpu_ops
WHERE correlation IS NOT NULL AND category IN ('cuda_runtime', 'Runtime', 'cuda_driver')
QUALIFY row_number() OVER (
    PARTITION BY correlation ORDER BY category = 'cuda_driver', op_id) = 1;

CREATE OR REPLACE TEMP TABLE ext_ops AS
SELECT external_id, op_id FROM out_cpu_ops
WHERE external_id IS NOT NULL AND category IN ('cpu_op', 'Operator', 'user_annotation')
QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY depth DESC, op_id) = 1;

CREATE OR REPLACE TEMP TABLE gpu_full AS
SELECT
    g.*,
    l.op_id AS launch_op_id,
    x.op_id AS cpu_op_id,
    l.step AS step
FROM gpu_raw g
LEFT JOIN launches l ON l.correlation = g.correlation
LEFT JOIN ext_ops x ON x.external_id = g.external_id;

CREATE OR REPLACE TEMP TABLE out_gpu_ops AS
SELECT gpu_op_id, device, stream, name, kind, category, start_ns, end_ns, dur_ns, correlation,
       external_id, bytes, launch_op_id, cpu_op_id, step
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
       min(g.start_ns) AS gpu_start_ns, max(g.end_ns) AS gpu_end_ns
FROM step_spans s LEFT JOIN gpu_full g ON g.step = s.step
GROUP BY ALL;

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
