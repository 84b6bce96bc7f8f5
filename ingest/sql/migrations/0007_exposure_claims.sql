-- Schema version 7 (migration 7, ingest/schema.py): collective_exposure.exposed_claim_ns,
-- the exposed time each collective's transfer overlaps, claimed in full by every
-- collective running there (exposed_ns shares it out). The planner's calibration charges
-- these claims class by class (docs/planner.md): where a TP and a DP all-reduce are
-- exposed together, the compute stream waits for the TP one. NULL in the rows of older
-- runs (re-ingest a run to fill it); no parameters.
ALTER TABLE collective_exposure ADD COLUMN IF NOT EXISTS exposed_claim_ns BIGINT;
