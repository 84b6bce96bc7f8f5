-- Schema version 3 (migration 3, ingest/schema.py): communication kernels that are not
-- NCCL's and CUDA/HIP graphs (docs/attribution.md). Adds columns, NULL in the rows of
-- older runs (re-ingest a run to fill them); no parameters.
ALTER TABLE gpu_ops ADD COLUMN IF NOT EXISTS graph_id BIGINT;          -- CUDA graph of the op
ALTER TABLE gpu_ops ADD COLUMN IF NOT EXISTS graph_node_id BIGINT;     -- its node in the graph
ALTER TABLE steps ADD COLUMN IF NOT EXISTS graph_launches INTEGER;     -- graph launches in the step
ALTER TABLE steps ADD COLUMN IF NOT EXISTS graph_launches_unlinked INTEGER;  -- ... with no GPU op
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS library VARCHAR;      -- nccl | rccl | gloo | deepep | ...
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS comm_op VARCHAR;      -- the library's operation
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS comm_role VARCHAR;    -- the role the kernel table gives
ALTER TABLE step_attribution ADD COLUMN IF NOT EXISTS window_source VARCHAR;  -- gpu | cpu | cpu_step
