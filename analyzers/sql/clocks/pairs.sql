-- Per pair of hosts that meet in an instance (clocks/ends.sql's clk_ends; hosts chained
-- in their order within each instance, so an instance of H hosts gives H - 1 pairs, not
-- H^2), how far b's clock is ahead of a's: a constant (the median of the differences of
-- their ends) and a line in time (Tukey's resistant line: the slope through the medians
-- of the first and last thirds of the instances in time; the intercept the median of
-- what remains), each with its residual (the median of the absolute differences left).
-- Times are ns from $t0 (the first matched end). Parameters: $t0.
WITH chained AS (
    SELECT inst, lag(host_no) OVER (PARTITION BY inst ORDER BY host_no) AS a, host_no AS b,
        lag(e) OVER (PARTITION BY inst ORDER BY host_no) AS ea, e AS eb
    FROM clk_ends
), d AS (
    SELECT a, b, CAST(ea - $t0 AS DOUBLE) AS t, CAST(eb - ea AS DOUBLE) AS diff,
        ntile(3) OVER (PARTITION BY a, b ORDER BY ea) AS third
    FROM chained WHERE a IS NOT NULL
), fit AS (
    SELECT a, b, count(*) AS n, median(diff) AS const,
        (median(diff) FILTER (WHERE third = 3) - median(diff) FILTER (WHERE third = 1))
            / nullif(median(t) FILTER (WHERE third = 3) - median(t) FILTER (WHERE third = 1), 0)
            AS slope,
        min(t) AS t_min, max(t) AS t_max
    FROM d GROUP BY a, b
), line AS (
    SELECT d.a, d.b, median(d.diff - coalesce(f.slope, 0) * d.t) AS intercept
    FROM d JOIN fit f USING (a, b) GROUP BY d.a, d.b
)
SELECT f.a, f.b, f.n, f.const, coalesce(f.slope, 0) AS slope, l.intercept,
    median(abs(d.diff - f.const)) AS const_res,
    median(abs(d.diff - l.intercept - coalesce(f.slope, 0) * d.t)) AS line_res,
    f.t_max - f.t_min AS span
FROM fit f JOIN line l USING (a, b) JOIN d USING (a, b)
GROUP BY f.a, f.b, f.n, f.const, f.slope, l.intercept, f.t_min, f.t_max
ORDER BY f.a, f.b
