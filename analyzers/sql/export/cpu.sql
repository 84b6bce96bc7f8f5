-- The CPU events of the export: every cpu_ops row of the chosen ranks in the chosen steps
-- (the op's step, else its start inside a chosen step window) as a complete event on its
-- thread, on the aligned clock, with its name, category and args as Kineto wrote them
-- (External id, correlation, shapes, types, the collective's args for
-- record_param_comms), by rank and start. Reads x_ranks, x_steps, x_origin. Parameters:
-- $run.
WITH comm AS (
    SELECT rank, cpu_op_id, any_value(c) AS c FROM collectives c
    WHERE run = $run AND cpu_op_id IS NOT NULL GROUP BY rank, cpu_op_id
)
SELECT CAST(json_object(
    'ph', 'X', 'cat', o.category, 'name', o.name, 'pid', o.rank, 'tid', o.tid,
    'ts', x_us(o.start_ns, r.offset_ns, r.drift_ppm, r.ref_ns, g.origin),
    'dur', round(o.dur_ns / 1000.0, 3),
    'args', json_object(
        'External id', o.external_id, 'correlation', o.correlation,
        'Sequence number', o.sequence_number, 'Fwd thread id', o.fwd_thread_id,
        'Record function id', o.record_function_id, 'Input Dims', o.input_dims,
        'Input type', o.input_types, 'Concrete Inputs', o.concrete_inputs,
        'Collective name', m.c.collective_raw, 'Process Group Name', m.c.pg_name,
        'Process Group Description', m.c.pg_desc, 'Process Group Ranks', m.c.pg_ranks,
        'Group size', m.c.group_size, 'dtype', m.c.dtype,
        'In msg nelems', m.c.in_nelems, 'Out msg nelems', m.c.out_nelems,
        'Seq', m.c.nccl_seq, 'Dst Rank', CASE WHEN m.c.collective = 'send' THEN m.c.peer_rank END,
        'Src Rank', CASE WHEN m.c.collective = 'recv' THEN m.c.peer_rank END,
        'step', o.step)) AS VARCHAR) AS ev
FROM cpu_ops o
JOIN x_ranks r USING (rank)
CROSS JOIN x_origin g
LEFT JOIN comm m ON m.rank = o.rank AND m.cpu_op_id = o.op_id
WHERE o.run = $run AND o.start_ns IS NOT NULL
  AND EXISTS (SELECT 1 FROM x_steps s WHERE s.rank = o.rank
              AND (s.step = o.step OR (o.start_ns >= s.ws AND o.start_ns < s.we)))
ORDER BY o.rank, o.start_ns, ev  -- one order, whatever DuckDB's threads did
