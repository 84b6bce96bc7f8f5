-- The host's recorded work on rank $rank of run $run between $lo and $hi ns, as disjoint
-- islands (start_ns, end_ns), in time order: the union of every thread's CPU ops and
-- runtime / driver calls ($what = 'work'), or of its waits for the GPU among them, the
-- synchronizing calls and the async copies that blocked ($what = 'wait': the macros of
-- waits/macros.sql, which the caller installs). Annotations are left out: they mark
-- ranges, not work. The critical path's note weighs the host time on the path against
-- it (analyzers/critical_path/analysis.py). Reads cpu_ops (through the macros too);
-- writes nothing. Parameters: $run, $rank, $lo, $hi, $what.
WITH spans AS (
    SELECT start_ns AS s, end_ns AS e FROM cpu_ops
    WHERE $what = 'work' AND run = $run AND rank = $rank
      AND category IN ('cpu_op', 'cuda_runtime', 'cuda_driver', 'Operator', 'Runtime')
      AND end_ns > $lo AND start_ns < $hi
    UNION ALL
    SELECT start_ns, end_ns FROM sync_calls($run)
    WHERE $what = 'wait' AND rank = $rank AND end_ns > $lo AND start_ns < $hi
    UNION ALL
    SELECT start_ns, end_ns FROM blocking_copies($run, $rank, $rank)
    WHERE $what = 'wait' AND end_ns > $lo AND start_ns < $hi
), reach AS (
    SELECT s, e, max(e) OVER (ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
        AS before FROM spans
), island AS (
    SELECT s, e, sum(CASE WHEN before IS NULL OR s > before THEN 1 ELSE 0 END)
        OVER (ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS k FROM reach
)
SELECT min(s) AS start_ns, max(e) AS end_ns FROM island GROUP BY k ORDER BY start_ns;
