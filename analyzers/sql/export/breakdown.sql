-- The export's breakdown track of one step: the segments of the Timeline
-- (detail/timeline.sql, stored by analyzers/export.py as the temp table x_seg: rank,
-- start_ns and end_ns from the window start, cat, name) as slices named by their
-- category on the rank's `breakdown (stepscope)` thread, on the aligned clock. Reads
-- x_seg, x_ranks, x_steps, x_origin. Parameters: $step.
SELECT CAST(json_object(
    'ph', 'X', 'cat', 'stepscope breakdown',
    'name', CASE x.cat WHEN 1 THEN 'compute' WHEN 2 THEN 'recompute'
                       WHEN 3 THEN 'exposed communication' WHEN 4 THEN 'straggler wait'
                       WHEN 5 THEN 'bubble' WHEN 6 THEN 'memory' ELSE 'idle' END,
    'pid', x.rank, 'tid', 1::BIGINT << 41,
    'ts', x_us(s.ws + x.start_ns, r.offset_ns, r.drift_ppm, r.ref_ns, o.origin),
    'dur', round((x.end_ns - x.start_ns) / 1000.0, 3),
    'args', json_object('step', $step, 'op', x.name)) AS VARCHAR) AS ev
FROM x_seg x
JOIN x_ranks r USING (rank)
JOIN x_steps s ON s.rank = x.rank AND s.step = $step
CROSS JOIN x_origin o
ORDER BY x.rank, x.start_ns, ev  -- one order, whatever DuckDB's threads did
