-- Per rank of run $run: the peak allocated and reserved bytes of its GPU, when (event,
-- step) and in which op the peak was reached (its caller for a mem_factory op), and the device's memory (the rank's
-- deviceProperties totalGlobalMem). Reads mem_timeline (memory/timeline.sql), ranks,
-- cpu_ops. Parameter: $run.
WITH peak AS (
    SELECT rank, any_value(source) AS source, max(allocated) AS peak_allocated,
        max(reserved) AS peak_reserved, count(*) AS events
    FROM mem_timeline GROUP BY rank
), first_peak AS (
    SELECT t.rank, t.event_id, t.ts_ns, t.step, t.op_id
    FROM mem_timeline t JOIN peak p ON p.rank = t.rank AND t.allocated = p.peak_allocated
    QUALIFY row_number() OVER (PARTITION BY t.rank ORDER BY t.ts_ns, t.event_id) = 1
)
SELECT p.rank, r.host, p.source, p.events, p.peak_allocated, p.peak_reserved,
    f.event_id AS peak_event, f.ts_ns AS peak_ts_ns, f.step AS peak_step,
    coalesce(CASE WHEN mem_factory(o.name) THEN po.name END, o.name) AS op_at_peak,
    TRY_CAST(r.device_properties ->> 'totalGlobalMem' AS BIGINT) AS device_memory
FROM peak p
JOIN first_peak f ON f.rank = p.rank
LEFT JOIN ranks r ON r.run = $run AND r.rank = p.rank
LEFT JOIN cpu_ops o ON o.run = $run AND o.rank = p.rank AND o.op_id = f.op_id
LEFT JOIN cpu_ops po ON po.run = $run AND po.rank = p.rank AND po.op_id = o.parent_id
ORDER BY p.rank;
