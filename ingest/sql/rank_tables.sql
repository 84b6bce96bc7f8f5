-- Turns one Kineto trace (temp table `doc`, one row, read by ingest/reader.py) into the
-- rank tables `out_*`. Rank-agnostic: the loader adds `run` and `rank` when it inserts.
-- Statements run in order; each one depends only on those above it.

CREATE OR REPLACE TEMP TABLE meta AS
SELECT
    TRY_CAST(baseTimeNanoseconds AS BIGINT) AS base_ns,
    CAST(distributedInfo AS JSON) AS distributed_info,
    CAST(deviceProperties AS JSON) AS device_properties,
    CAST(host_name AS VARCHAR) AS host_name
FROM doc;

-- Every duration ('X') and metadata ('M') event, times in absolute ns.
CREATE OR REPLACE TEMP TABLE ev AS
SELECT
    e.ph AS ph,
    e.cat AS cat,
    e.name AS name,
    e.pid AS pid_raw,
    e.tid AS tid_raw,
    us_to_ns(e.ts) + coalesce((SELECT base_ns FROM meta), 0) AS start_ns,
    greatest(coalesce(us_to_ns(e.dur), 0), 0) AS dur_ns,
    e.args AS args
FROM (SELECT unnest(traceEvents) AS e FROM doc)
WHERE e.ph IN ('X', 'M') AND e.ts IS NOT NULL;

CREATE OR REPLACE TEMP TABLE category_counts AS
SELECT coalesce(cat, '') AS category, ph, count(*) AS n FROM ev GROUP BY ALL;

-- ---------------------------------------------------------------- CPU side
CREATE OR REPLACE TEMP TABLE cpu_raw AS
SELECT
    leading_int(pid_raw) AS pid,
    leading_int(tid_raw) AS tid,
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
    args."Concrete Inputs" AS concrete_inputs,
    args AS args
FROM ev
WHERE ph = 'X' AND cat IN (
    'cpu_op', 'Operator', 'user_annotation', 'python_function',
    'cuda_runtime', 'Runtime', 'cuda_driver');

-- Stable ids: order of start on each thread, enclosing spans first.
CREATE OR REPLACE TEMP TABLE cpu_ids AS
SELECT *, row_number() OVER (ORDER BY start_ns, end_ns DESC, tid, name, category) - 1 AS op_id
FROM cpu_raw;

-- Nesting by time containment on each thread: depth = spans open when the op starts.
-- Boundaries sort ends before starts at equal times, enclosing starts first.
CREATE OR REPLACE TEMP TABLE cpu_depth AS
WITH bounds AS (
    SELECT op_id, pid, tid, start_ns AS t, 1 AS kind, end_ns, 1 AS delta FROM cpu_ids
    UNION ALL
    SELECT op_id, pid, tid, end_ns AS t, 0 AS kind, end_ns, -1 AS delta FROM cpu_ids
), running AS (
    SELECT op_id, kind,
        sum(delta) OVER (PARTITION BY pid, tid ORDER BY t, kind, end_ns DESC, op_id
                         ROWS UNBOUNDED PRECEDING) AS open_spans
    FROM bounds
)
SELECT c.*, CAST(r.open_spans - 1 AS INTEGER) AS depth
FROM cpu_ids c JOIN running r ON r.op_id = c.op_id AND r.kind = 1;

-- Parent: latest-starting span one level up on the same thread. Spans that only
-- partially overlap (gloo send/recv) fall back to the span two levels up.
CREATE OR REPLACE TEMP TABLE cpu_parent AS
WITH up1 AS (
    SELECT c.op_id, p.op_id AS p1, p.end_ns AS p1_end
    FROM cpu_depth c ASOF LEFT JOIN cpu_depth p
      ON c.pid IS NOT DISTINCT FROM p.pid AND c.tid IS NOT DISTINCT FROM p.tid
     AND c.depth - 1 = p.depth AND c.start_ns >= p.start_ns
), up2 AS (
    SELECT c.op_id, p.op_id AS p2, p.end_ns AS p2_end
    FROM cpu_depth c ASOF LEFT JOIN cpu_depth p
      ON c.pid IS NOT DISTINCT FROM p.pid AND c.tid IS NOT DISTINCT FROM p.tid
     AND c.depth - 2 = p.depth AND c.start_ns >= p.start_ns
)
SELECT c.*,
    CASE WHEN up1.p1_end >= c.end_ns THEN up1.p1
         WHEN up2.p2_end >= c.end_ns THEN up2.p2
         ELSE up1.p1 END AS parent_id
FROM cpu_depth c JOIN up1 USING (op_id) JOIN up2 USING (op_id);

CREATE OR REPLACE TEMP TABLE step_spans AS
SELECT
    CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER) AS step,
    pid, tid, start_ns, end_ns, op_id
FROM cpu_parent
WHERE regexp_matches(name, '^ProfilerStep#\d+$')
QUALIFY row_number() OVER (PARTITION BY step ORDER BY dur_ns DESC) = 1;

CREATE OR REPLACE TEMP TABLE cpu_full AS
SELECT c.*, CASE WHEN c.start_ns < s.end_ns THEN s.step END AS step
FROM cpu_parent c ASOF LEFT JOIN step_spans s ON c.start_ns >= s.start_ns;

CREATE OR REPLACE TEMP TABLE out_cpu_ops AS
SELECT op_id, pid, tid, name, category, start_ns, end_ns, dur_ns, external_id, correlation,
       sequence_number, fwd_thread_id, record_function_id,
       CAST(input_dims AS JSON) AS input_dims, CAST(input_types AS JSON) AS input_types,
       CAST(concrete_inputs AS JSON) AS concrete_inputs, parent_id, depth, step
FROM cpu_full;

-- ---------------------------------------------------------------- GPU side
CREATE OR REPLACE TEMP TABLE gpu_raw AS
SELECT
    CAST(coalesce(TRY_CAST(args.device AS INTEGER), leading_int(pid_raw)) AS INTEGER) AS device,
    coalesce(TRY_CAST(args.stream AS BIGINT), leading_int(tid_raw)) AS stream,
    name,
    CASE
        WHEN cat IN ('gpu_memcpy', 'Memcpy') THEN 'memcpy'
        WHEN cat IN ('gpu_memset', 'Memset') THEN 'memset'
        WHEN regexp_matches(name, '^(void\s+)?nccl', 'i') OR args."Collective name" IS NOT NULL
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
    args AS args
FROM ev
WHERE ph = 'X' AND cat IN ('kernel', 'Kernel', 'gpu_memcpy', 'Memcpy', 'gpu_memset', 'Memset');

CREATE OR REPLACE TEMP TABLE launches AS
SELECT correlation, op_id, step FROM cpu_full
WHERE correlation IS NOT NULL AND category IN ('cuda_runtime', 'Runtime', 'cuda_driver')
QUALIFY row_number() OVER (
    PARTITION BY correlation ORDER BY category = 'cuda_driver', op_id) = 1;

CREATE OR REPLACE TEMP TABLE ext_ops AS
SELECT external_id, op_id FROM cpu_full
WHERE external_id IS NOT NULL AND category IN ('cpu_op', 'Operator', 'user_annotation')
QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY depth DESC, op_id) = 1;

CREATE OR REPLACE TEMP TABLE gpu_full AS
SELECT
    g.*,
    row_number() OVER (ORDER BY g.start_ns, g.device, g.stream, g.end_ns, g.name) - 1 AS gpu_op_id,
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
    CAST(leading_int(pid_raw) AS INTEGER) AS device,
    leading_int(tid_raw) AS stream,
    name, start_ns, start_ns + dur_ns AS end_ns,
    TRY_CAST(args."External id" AS BIGINT) AS external_id
FROM ev WHERE ph = 'X' AND cat = 'gpu_user_annotation';

CREATE OR REPLACE TEMP TABLE out_steps AS
SELECT s.step, s.tid, s.start_ns, s.end_ns, s.end_ns - s.start_ns AS dur_ns,
       count(g.gpu_op_id) AS n_gpu_ops,
       min(g.start_ns) AS gpu_start_ns, max(g.end_ns) AS gpu_end_ns
FROM step_spans s LEFT JOIN gpu_full g ON g.step = s.step
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE out_threads AS
SELECT DISTINCT leading_int(pid_raw) AS pid, leading_int(tid_raw) AS tid,
       CAST(args.name AS VARCHAR) AS thread_name
FROM ev WHERE ph = 'M' AND name = 'thread_name';

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
