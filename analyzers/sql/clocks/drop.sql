-- Drops the clocks' evidence (clocks/start.sql and ends.sql: clk_hosts, clk_rank_ends,
-- clk_ends, clk_rank_devs) once the offsets are written: inside the ingest the temp
-- tables would otherwise stay in memory through the commit (benchmarks/README.md,
-- "The attribution's allocation"). No parameters.
DROP TABLE IF EXISTS clk_rank_ends;
DROP TABLE IF EXISTS clk_ends;
DROP TABLE IF EXISTS clk_hosts;
DROP TABLE IF EXISTS clk_rank_devs;
