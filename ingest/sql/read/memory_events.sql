-- Builds `out_memory_events` (docs/memory.md): one row per `[memory]` instant event that
-- profile_memory=True writes (the caching allocator's allocations and frees), with the
-- CPU op it happened in and its step. Runs after rank_tables.sql (reads raw_events, meta,
-- cpu_raw, step_spans), before collectives.sql drops raw_events; no parameters.
-- Formats: torch >= 1.10 writes `cat: cpu_instant_event` with Addr, Bytes, Total Allocated,
-- Total Reserved, Device Type, Device Id; the 2021 format (torch 1.9) writes Bytes,
-- Device Type and Device Id only (the totals stay NULL; docs/memory.md says how the
-- analysis reads them).
CREATE OR REPLACE TEMP TABLE mem_raw AS
SELECT rowid AS event_id,
    us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta) AS ts_ns,
    leading_int(pid) AS pid, leading_int(tid) AS tid,
    -- the event's args: memory_bytes.sql fills them (a second read of the file)
    CAST(NULL AS INTEGER) AS device_type,
    CAST(NULL AS INTEGER) AS device_id,
    CAST(NULL AS BIGINT) AS addr,
    CAST(NULL AS BIGINT) AS bytes,
    CAST(NULL AS BIGINT) AS total_allocated,
    CAST(NULL AS BIGINT) AS total_reserved
FROM raw_events
WHERE ph IN ('i', 'I') AND name = '[memory]' AND ts IS NOT NULL;

-- The innermost CPU op (cpu_op / Operator) open on the event's thread at its time: with
-- n ops started at or before it and m of them ended before it, n - m are open, and the
-- innermost is the latest-starting op at depth n - m - 1 (ops nest on a thread).
CREATE OR REPLACE TEMP TABLE mem_ops AS
SELECT op_id, pid, tid, start_ns, end_ns,
    row_number() OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns DESC, op_id) AS n_started
FROM cpu_raw
WHERE category IN ('cpu_op', 'Operator')
  AND (pid, tid) IN (SELECT DISTINCT pid, tid FROM mem_raw);

CREATE OR REPLACE TEMP TABLE mem_op_ends AS
SELECT pid, tid, end_ns, row_number() OVER (PARTITION BY pid, tid ORDER BY end_ns) AS n_ended
FROM mem_ops;

CREATE OR REPLACE TEMP TABLE mem_op_depth AS
SELECT s.op_id, s.pid, s.tid, s.start_ns,
    CAST(s.n_started - 1 - coalesce(e.n_ended, 0) AS INTEGER) AS depth
FROM mem_ops s ASOF LEFT JOIN mem_op_ends e
  ON s.pid = e.pid AND s.tid = e.tid AND s.start_ns >= e.end_ns;

CREATE OR REPLACE TEMP TABLE mem_open AS
WITH started AS (
    SELECT m.event_id, coalesce(s.n_started, 0) AS n_started
    FROM mem_raw m ASOF LEFT JOIN mem_ops s
      ON m.pid = s.pid AND m.tid = s.tid AND m.ts_ns >= s.start_ns
), ended AS (
    SELECT m.event_id, coalesce(e.n_ended, 0) AS n_ended
    FROM mem_raw m ASOF LEFT JOIN mem_op_ends e
      ON m.pid = e.pid AND m.tid = e.tid AND m.ts_ns > e.end_ns
)
SELECT m.*, CAST(s.n_started - e.n_ended AS INTEGER) AS n_open
FROM mem_raw m JOIN started s USING (event_id) JOIN ended e USING (event_id);

CREATE OR REPLACE TEMP TABLE out_memory_events AS
WITH innermost AS (
    SELECT m.event_id, d.op_id
    FROM (SELECT * FROM mem_open WHERE n_open > 0) m
    ASOF LEFT JOIN mem_op_depth d
      ON m.pid = d.pid AND m.tid = d.tid AND m.n_open - 1 = d.depth AND m.ts_ns >= d.start_ns
)
SELECT m.event_id, m.ts_ns, m.pid, m.tid, m.device_type, m.device_id, m.addr, m.bytes,
    m.total_allocated, m.total_reserved, i.op_id,
    CASE WHEN m.ts_ns < s.end_ns THEN s.step END AS step
FROM mem_open m
LEFT JOIN innermost i USING (event_id)
ASOF LEFT JOIN step_spans s ON m.ts_ns >= s.start_ns
ORDER BY m.event_id;
