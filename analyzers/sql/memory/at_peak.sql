-- The allocations live at each rank's peak (docs/memory.md), by the op that made them:
-- an allocation (Bytes > 0) is freed by the next event on its address; it is live at the
-- peak when it was made at or before the peak event and not freed before it. The op is
-- the innermost CPU op open at the allocation, or its parent when that op only makes
-- tensors (mem_factory: aten::empty, zeros, ...). Only with addresses (the 2021 format
-- has none). Reads mem_timeline, cpu_ops. Parameters: $run, $peaks (a list of
-- {rank, ts_ns, event_id}: each rank's peak event), $top (ops kept per rank).
WITH peak AS (
    SELECT p.rank, p.ts_ns, p.event_id FROM (SELECT unnest($peaks) AS p)
), paired AS (
    SELECT t.*, lead(t.bytes) OVER w AS next_bytes, lead(t.ts_ns) OVER w AS next_ts,
        lead(t.event_id) OVER w AS next_event
    FROM mem_timeline t WHERE t.addr IS NOT NULL
    WINDOW w AS (PARTITION BY t.rank, t.addr ORDER BY t.ts_ns, t.event_id)
), live AS (
    SELECT a.rank, a.bytes, a.op_id
    FROM paired a JOIN peak p ON p.rank = a.rank
    WHERE a.bytes > 0 AND (a.ts_ns, a.event_id) <= (p.ts_ns, p.event_id)
      AND (a.next_bytes IS NULL OR a.next_bytes >= 0
           OR (a.next_ts, a.next_event) > (p.ts_ns, p.event_id))
), named AS (
    SELECT l.rank, l.bytes,
        coalesce(CASE WHEN mem_factory(o.name) THEN p.name END, o.name, 'outside any op') AS op
    FROM live l
    LEFT JOIN cpu_ops o ON o.run = $run AND o.rank = l.rank AND o.op_id = l.op_id
    LEFT JOIN cpu_ops p ON p.run = $run AND p.rank = l.rank AND p.op_id = o.parent_id
)
SELECT rank, op, sum(bytes) AS bytes, count(*) AS allocations
FROM named GROUP BY rank, op
QUALIFY row_number() OVER (PARTITION BY rank ORDER BY sum(bytes) DESC, op) <= $top
ORDER BY rank, bytes DESC, op;
