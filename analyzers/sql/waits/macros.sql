-- When the CPU waited for the GPU inside a runtime call: one definition, as temporary
-- macros, for the idle split (attribution/idle.sql, at ingest) and the critical path
-- (critical_path/graph.sql), so both count the same calls as CPU waits. Installed by
-- analyzers._sql.install_macros, analyzers.breakdown.attribution.materialize and
-- analyzers.critical_path.graph.load; allowed on read-only connections.

-- blocking_copies(run_name, first_rank, last_rank): the async copies of ranks first_rank to
-- last_rank of run `run_name` that blocked the CPU: a
-- cudaMemcpyAsync / cudaMemcpy2DAsync (or a hip twin) that returned only once its own
-- copy's GPU op (linked by correlation, gpu_ops.launch_op_id) had ended. A copy into
-- pageable host memory is synchronous (.item(), .cpu(), .tolist() on real traces); a
-- copy that only queued returns before its GPU op ends. A device-to-device copy never
-- waits for the host (a short one may end inside its own call: not a wait). One row per
-- call: rank, tid,
-- op_id, start_ns, end_ns. Reads cpu_ops and gpu_ops; callers filter time.
-- The ranks are the macro's own filter, on both tables: a caller's `WHERE rank BETWEEN`
-- stays above the name list's join and the EXISTS, so the scans read every rank's blocks
-- of the run (each batch of the idle split read all of a 2,048-rank run's cpu_ops).
CREATE OR REPLACE TEMP MACRO blocking_copies(run_name, first_rank, last_rank) AS TABLE
SELECT c.rank, c.tid, c.op_id, c.start_ns, c.end_ns
FROM cpu_ops c
WHERE c.run = run_name AND c.rank BETWEEN first_rank AND last_rank
  AND c.category IN ('cuda_runtime', 'Runtime')
  AND c.name IN ('cudaMemcpyAsync', 'cudaMemcpy2DAsync', 'hipMemcpyAsync',
                 'hipMemcpy2DAsync', 'hipMemcpyDtoHAsync')
  AND EXISTS (SELECT 1 FROM gpu_ops g WHERE g.run = run_name
              AND g.rank BETWEEN first_rank AND last_rank AND g.rank = c.rank
              AND g.launch_op_id = c.op_id AND g.end_ns <= c.end_ns
              AND g.name NOT LIKE '%DtoD%' AND g.name NOT LIKE '%Device -> Device%');

-- sync_calls(run_name): the synchronizing runtime and driver calls of run `run_name`, where
-- the host waits for the GPU by definition: any *Synchronize* call (cudaDeviceSynchronize,
-- cudaStreamSynchronize, cudaEventSynchronize, cuCtxSynchronize, their hip twins, ...)
-- and the synchronous copies (cudaMemcpy, cudaMemcpy2D, cuMemcpyDtoH and hip twins). One
-- row per call: rank, tid, op_id, start_ns, end_ns. Reads cpu_ops; callers filter ranks.
CREATE OR REPLACE TEMP MACRO sync_calls(run_name) AS TABLE
SELECT rank, tid, op_id, start_ns, end_ns
FROM cpu_ops
WHERE run = run_name AND category IN ('cuda_runtime', 'cuda_driver', 'Runtime')
  AND (name LIKE '%Synchronize%'
       OR name IN ('cudaMemcpy', 'hipMemcpy', 'cudaMemcpy2D', 'hipMemcpy2D', 'cuMemcpyDtoH',
                   'cuMemcpyDtoH_v2', 'hipMemcpyDtoH'));
