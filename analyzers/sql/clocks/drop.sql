-- Drops the clocks' evidence (clocks/ends.sql: clk_rank_ends, a row per matched call of
-- every rank, and clk_ends) once the offsets are written: inside the ingest the
-- temp tables would otherwise stay in memory through the commit (benchmarks/README.md,
-- "The attribution's allocation"). No parameters.
DROP TABLE IF EXISTS clk_rank_ends;
DROP TABLE IF EXISTS clk_ends;
