-- CUDA / HIP graphs in run $run (docs/attribution.md, "CUDA and HIP graphs" and "Graph
-- captures"): rank steps that launched a graph, rank steps whose window is the CPU step
-- because no GPU op is linked to their graph launch, GPU ops linked to a graph launch by
-- correlation id, rank steps that capture a graph (window_source 'capture') and the kernel
-- launches recorded into graphs: launch calls between a begin- and an end-capture call on
-- their thread that no GPU op is linked to. Reads steps, step_attribution, gpu_ops,
-- cpu_ops. Parameter: $run.
WITH capture AS (
    SELECT b.rank, b.tid, b.start_ns AS cs, min(e.end_ns) AS ce
    FROM cpu_ops b
    LEFT JOIN cpu_ops e ON e.run = $run AND e.rank = b.rank AND e.tid = b.tid
        AND e.start_ns >= b.start_ns
        AND e.name IN ('cudaStreamEndCapture', 'hipStreamEndCapture', 'cuStreamEndCapture')
    WHERE b.run = $run
      AND b.name IN ('cudaStreamBeginCapture', 'cudaStreamBeginCapture_v2',
                     'cudaStreamBeginCaptureToGraph', 'hipStreamBeginCapture',
                     'hipStreamBeginCaptureToGraph', 'cuStreamBeginCapture',
                     'cuStreamBeginCapture_v2')
    GROUP BY b.rank, b.tid, b.start_ns
)
SELECT
    (SELECT count(*) FROM steps WHERE run = $run AND graph_launches > 0) AS graph_steps,
    (SELECT count(*) FROM step_attribution WHERE run = $run AND window_source = 'cpu_step')
        AS cpu_window_steps,
    (SELECT count(*) FROM gpu_ops g
     JOIN cpu_ops o ON o.run = g.run AND o.rank = g.rank AND o.op_id = g.launch_op_id
     WHERE g.run = $run AND regexp_matches(o.name, '^(cuda|hip|cu)GraphLaunch')) AS graph_ops,
    (SELECT count(*) FROM step_attribution WHERE run = $run AND window_source = 'capture')
        AS capture_steps,
    (SELECT count(*) FROM cpu_ops o JOIN capture c ON c.rank = o.rank AND c.tid = o.tid
        AND o.start_ns >= c.cs AND (c.ce IS NULL OR o.start_ns <= c.ce)
     WHERE o.run = $run AND o.category IN ('cuda_runtime', 'cuda_driver', 'Runtime')
       AND regexp_matches(o.name, 'Launch(Cooperative)?Kernel')
       AND NOT EXISTS (SELECT 1 FROM gpu_ops g WHERE g.run = $run AND g.rank = o.rank
                       AND g.launch_op_id = o.op_id)) AS recorded_launches;
