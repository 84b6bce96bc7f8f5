-- The batches of clocks/start.sql's clk_hosts: (batch, lowest rank, highest rank), in
-- order. No parameters.
SELECT batch, min(rank), max(rank) FROM clk_hosts GROUP BY batch ORDER BY batch
