-- Ranks whose ends differ from their host's by more than the threshold in the median
-- over their instances (clocks/ends.sql's clk_rank_devs, gathered per batch of hosts):
-- a rank whose clock is not its host's. Returns (rank, host, median deviation in ns,
-- instances). No parameters.
SELECT rank, host, dev, n FROM clk_rank_devs ORDER BY rank
