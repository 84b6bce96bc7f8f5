-- How well the solved clocks ($clocks: [{host_no, offset, slope}], offset in ns at $t0,
-- slope in ns per ns) align the matched ends of clk_ends (clocks/ends.sql): per host,
-- the median over its instances of |its aligned end - the median aligned end of the
-- instance's hosts|, in ns, and its instances; and per rank, the median of its end minus
-- its host's (ranks of one host that disagree). Parameters: $clocks, $t0.
WITH c AS (
    SELECT unnest($clocks, recursive := true)
), aligned AS (
    SELECT e.inst, e.host_no,
        CAST(e.e - $t0 AS DOUBLE) * (1 - c.slope) - c.offset AS t
    FROM clk_ends e JOIN c USING (host_no)
), res AS (
    SELECT inst, host_no, abs(t - median(t) OVER (PARTITION BY inst)) AS r,
        count(*) OVER (PARTITION BY inst) AS hosts
    FROM aligned
)
SELECT host_no, CAST(round(coalesce(median(r) FILTER (WHERE hosts > 1), 0)) AS BIGINT),
    count(*) FILTER (WHERE hosts > 1) AS n
FROM res GROUP BY host_no ORDER BY host_no
