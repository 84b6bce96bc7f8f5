-- The GPU events of the export: every gpu_ops row of the chosen ranks in the chosen steps
-- (the op's step, else its start inside a chosen step window) as a complete event on its
-- stream's thread (meta.sql's tid), on the aligned clock, with Kineto's args (device,
-- stream, correlation, External id, bytes), and the GPU annotations (gpu_user_annotation:
-- NCCL's and record_function's ranges on the stream), by rank and start. Reads x_ranks,
-- x_steps, x_origin. Parameters: $run.
SELECT ev FROM (
    SELECT CAST(json_object(
        'ph', 'X', 'cat', g.category, 'name', g.name, 'pid', g.rank,
        'tid', (1::BIGINT << 40) + coalesce(g.device, 0) * (1 << 24) + g.stream,
        'ts', x_us(g.start_ns, r.offset_ns, r.drift_ppm, r.ref_ns, o.origin),
        'dur', round(g.dur_ns / 1000.0, 3),
        'args', json_object('device', g.device, 'stream', g.stream, 'correlation', g.correlation,
                            'External id', g.external_id, 'bytes', g.bytes, 'kind', g.kind,
                            'step', g.step)) AS VARCHAR) AS ev, g.rank, g.start_ns
    FROM gpu_ops g
    JOIN x_ranks r USING (rank)
    CROSS JOIN x_origin o
    WHERE g.run = $run AND g.start_ns IS NOT NULL AND g.stream IS NOT NULL
      AND EXISTS (SELECT 1 FROM x_steps s WHERE s.rank = g.rank
                  AND (s.step = g.step OR (g.start_ns >= s.ws AND g.start_ns < s.we)))
    UNION ALL
    SELECT CAST(json_object(
        'ph', 'X', 'cat', 'gpu_user_annotation', 'name', a.name, 'pid', a.rank,
        'tid', (1::BIGINT << 40) + coalesce(a.device, 0) * (1 << 24) + a.stream,
        'ts', x_us(a.start_ns, r.offset_ns, r.drift_ppm, r.ref_ns, o.origin),
        'dur', round((a.end_ns - a.start_ns) / 1000.0, 3),
        'args', json_object('device', a.device, 'stream', a.stream,
                            'External id', a.external_id)) AS VARCHAR), a.rank, a.start_ns
    FROM gpu_annotations a
    JOIN x_ranks r USING (rank)
    CROSS JOIN x_origin o
    WHERE a.run = $run AND a.start_ns IS NOT NULL AND a.stream IS NOT NULL
      AND EXISTS (SELECT 1 FROM x_steps s WHERE s.rank = a.rank
                  AND a.start_ns >= s.ws AND a.start_ns < s.we)
)
ORDER BY rank, start_ns, ev  -- one order, whatever DuckDB's threads did
