-- The device memory timeline of run $run (docs/memory.md) as the temp table mem_timeline:
-- one row per `[memory]` event on each rank's GPU (c10 Device Type 1 CUDA, or 6 HIP as
-- ROCm builds may write it: SGLang's MI300X decode trace of AMD-AGI/TraceLens has 1,014
-- events of type 6 and read as 'no memory events'; the device with most events), with `allocated` = the allocator's Total Allocated after the event, or, in the
-- 2021 format without totals, the running sum of Bytes from the trace's start (source
-- bytes_delta; what was allocated before the trace is unknown). Also the macro
-- mem_factory(name): ops that only make tensors (their caller is the op that allocates).
-- Reads memory_events.
-- Parameter: $run.
CREATE OR REPLACE TEMP TABLE mem_timeline AS
WITH device AS (
    SELECT rank, device_id FROM memory_events
    WHERE run = $run AND device_type IN (1, 6)
    GROUP BY rank, device_id
    QUALIFY row_number() OVER (PARTITION BY rank ORDER BY count(*) DESC, device_id) = 1
), events AS (
    SELECT e.rank, e.event_id, e.ts_ns, e.addr, e.bytes, e.op_id, e.step,
        e.total_allocated, e.total_reserved,
        bool_and(e.total_allocated IS NOT NULL) OVER (PARTITION BY e.rank) AS has_totals
    FROM memory_events e JOIN device d ON d.rank = e.rank AND d.device_id = e.device_id
    WHERE e.run = $run AND e.device_type IN (1, 6)
)
SELECT rank, event_id, ts_ns, addr, bytes, op_id, step, total_reserved AS reserved,
    CASE WHEN has_totals THEN total_allocated
         ELSE sum(coalesce(bytes, 0)) OVER (PARTITION BY rank ORDER BY ts_ns, event_id
                                            ROWS UNBOUNDED PRECEDING) END AS allocated,
    CASE WHEN has_totals THEN 'totals' ELSE 'bytes_delta' END AS source
FROM events;

CREATE OR REPLACE TEMP MACRO mem_factory(name) AS regexp_matches(name,
    '^aten::(empty|empty_strided|empty_like|zeros|zeros_like|ones|ones_like|full|new_empty|new_empty_strided|new_zeros|resize_)$');
