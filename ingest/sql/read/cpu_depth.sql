-- Temp table cpu_depth (op_id, start_ns, depth, parent_id): every CPU op's nesting on its
-- thread. Reads cpu_nesting (registered by ingest/nesting.py: the ops with a numeric pid
-- and tid, nested there) and cpu_raw. Parameter: $no_parent, the parent id nesting.py
-- gives an op nothing encloses (stored as NULL).
-- Nesting by time containment on each thread (computed in nesting.py): an op's depth is
-- the number of ops open when it starts, i.e. the ops before it in (start, end DESC,
-- op_id) order (enclosing first at equal starts) that end after its start; at one
-- instant ends come before starts (an op ending exactly where the next begins does not
-- enclose it), except a zero-length op's end, which sorts right after its own start: it
-- ended, but did not start before the ops after it. Whole-microsecond traces have runs of
-- zero-length runtime calls at one instant (the DLRM job's cudaOccupancy... calls inside
-- aten::bmm): nested by edge order alone, one of them would enclose the next and every
-- later call of the op lose its parent. The parent is the latest-starting op one level
-- up on the same thread; a span that only partially overlaps that one (gloo send/recv)
-- takes the op two levels up instead, when that one encloses its end.
-- An op whose pid or tid is no number (NULL) has no thread to nest on: no parent, and
-- its depth the count of the ops started before it in its (pid, tid) group, a
-- zero-length op at one instant counting the zero-length ops after it.
CREATE OR REPLACE TEMP TABLE cpu_depth AS
SELECT op_id, start_ns, CAST(depth AS INTEGER) AS depth, nullif(parent_id, $no_parent) AS parent_id
FROM cpu_nesting
UNION ALL
SELECT op_id, start_ns,
    CAST(row_number() OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns DESC, op_id) - 1
         + sum(CASE WHEN end_ns = start_ns THEN 1 ELSE 0 END) OVER (
               PARTITION BY pid, tid, start_ns ORDER BY end_ns DESC, op_id
               ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS INTEGER),
    CAST(NULL AS BIGINT)
FROM cpu_raw WHERE pid IS NULL OR tid IS NULL;
