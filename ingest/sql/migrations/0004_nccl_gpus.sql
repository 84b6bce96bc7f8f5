-- Schema version 4 (migration 4, ingest/schema.py): NCCL logs per GPU (a process that
-- drives several GPUs has a row for each), GPUDirect RDMA status, repeated WARN lines
-- counted (docs/schema.md, "NCCL_DEBUG=INFO logs"). Adds columns, NULL in the rows of
-- older runs (re-ingest a run to fill them); no parameters.
ALTER TABLE nccl_processes ADD COLUMN IF NOT EXISTS nvml_dev INTEGER;   -- the GPU's nvmlDev
ALTER TABLE nccl_processes ADD COLUMN IF NOT EXISTS bus_id VARCHAR;     -- its PCI bus id
ALTER TABLE nccl_processes ADD COLUMN IF NOT EXISTS gdr BOOLEAN;        -- it uses GPUDirect RDMA
ALTER TABLE nccl_processes ADD COLUMN IF NOT EXISTS gdr_hca BOOLEAN;    -- an HCA supports it
ALTER TABLE nccl_comms ADD COLUMN IF NOT EXISTS use_gdr BOOLEAN;        -- `use ring PXN p GDR g`
ALTER TABLE nccl_comms ADD COLUMN IF NOT EXISTS init_line BIGINT;       -- its Init COMPLETE line
ALTER TABLE nccl_channels ADD COLUMN IF NOT EXISTS cuda_dev INTEGER;    -- the line's [dev]
ALTER TABLE nccl_warnings ADD COLUMN IF NOT EXISTS last_logged_at VARCHAR;
ALTER TABLE nccl_warnings ADD COLUMN IF NOT EXISTS n_lines BIGINT;      -- identical lines
