-- Evidence of the idle split of run $run, as means over ranks of each rank's mean over its
-- complete steps (like breakdown_ms): host-bound ms in gaps that began as a synchronizing
-- call returned, host-bound ms while a DataLoader annotation ran, gaps per step, and gaps
-- of at most $short_gap_ns per step. Reads complete_steps, idle_gaps. Parameters: $run,
-- $short_gap_ns.
WITH steps AS (
    SELECT rank, count(*) AS n FROM complete_steps WHERE run = $run GROUP BY rank
), per_rank AS (
    SELECT s.rank,
        coalesce(sum(g.host_bound_ns) FILTER (WHERE g.after_sync), 0) / any_value(s.n) AS sync_ns,
        coalesce(sum(g.loader_ns), 0) / any_value(s.n) AS loader_ns,
        count(g.rank) / any_value(s.n) AS gaps,
        count(g.rank) FILTER (WHERE g.end_ns - g.start_ns <= $short_gap_ns) / any_value(s.n)
            AS short_gaps
    FROM steps s
    LEFT JOIN (SELECT g.* FROM idle_gaps g JOIN complete_steps c USING (run, rank, step)
               WHERE g.run = $run) g ON g.rank = s.rank
    GROUP BY s.rank
)
SELECT avg(sync_ns) / 1e6 AS after_sync_ms, avg(loader_ns) / 1e6 AS data_loader_ms,
    avg(gaps) AS gaps_per_step, avg(short_gaps) AS short_gaps_per_step
FROM per_rank;
