-- The clocks' evidence of run $run starts empty (clocks/ends.sql fills it batch by batch
-- of hosts): clk_hosts (rank, host, host_no, batch: host 0 the host of the lowest rank;
-- hosts in that order, a new batch where the ranks before a host reach a multiple of
-- $batch_ranks, so a batch holds whole hosts, about $batch_ranks ranks), clk_ends
-- (inst, host, host_no, e, n_ranks) and clk_rank_devs (rank, host, dev, n).
-- Parameters: $run, $batch_ranks.
CREATE OR REPLACE TEMP TABLE clk_hosts AS
WITH r AS (
    SELECT coalesce(host, 'rank ' || rank) AS host, rank,
        min(rank) OVER (PARTITION BY coalesce(host, 'rank ' || rank)) AS first_rank
    FROM ranks WHERE run = $run
), h AS (
    SELECT host, dense_rank() OVER (ORDER BY first_rank) - 1 AS host_no, count(*) AS n
    FROM r GROUP BY host, first_rank
), b AS (
    SELECT host, host_no,
        (sum(n) OVER (ORDER BY host_no ROWS UNBOUNDED PRECEDING) - n) // $batch_ranks AS batch
    FROM h
)
SELECT r.rank, r.host, b.host_no, b.batch FROM r JOIN b USING (host);

CREATE OR REPLACE TEMP TABLE clk_ends (inst VARCHAR, host VARCHAR, host_no BIGINT,
                                       e BIGINT, n_ranks BIGINT);
CREATE OR REPLACE TEMP TABLE clk_rank_devs (rank INTEGER, host VARCHAR, dev BIGINT,
                                            n BIGINT);
