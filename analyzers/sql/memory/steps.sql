-- Peak allocated and reserved bytes per rank and step of run $run (events inside the
-- step's CPU interval; docs/memory.md). Reads mem_timeline (memory/timeline.sql).
SELECT rank, step, max(allocated) AS peak_allocated, max(reserved) AS peak_reserved
FROM mem_timeline WHERE step IS NOT NULL
GROUP BY rank, step ORDER BY rank, step;
