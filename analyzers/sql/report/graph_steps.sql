-- CUDA / HIP graphs in run $run (docs/attribution.md, "CUDA and HIP graphs"): rank steps
-- that launched a graph, rank steps whose window is the CPU step because no GPU op is
-- linked to their graph launch, and GPU ops linked to a graph launch by correlation id.
-- Reads steps, step_attribution, gpu_ops, cpu_ops. Parameter: $run.
SELECT
    (SELECT count(*) FROM steps WHERE run = $run AND graph_launches > 0) AS graph_steps,
    (SELECT count(*) FROM step_attribution WHERE run = $run AND window_source = 'cpu_step')
        AS cpu_window_steps,
    (SELECT count(*) FROM gpu_ops g
     JOIN cpu_ops o ON o.run = g.run AND o.rank = g.rank AND o.op_id = g.launch_op_id
     WHERE g.run = $run AND regexp_matches(o.name, '^(cuda|hip|cu)GraphLaunch')) AS graph_ops;
