-- How many CPU waits the critical-path graph found, by how (temporary table cp_syncs of
-- critical_path/graph.sql): sync_call (a synchronizing runtime call), blocking_copy (an
-- async copy that returned only once its own copy had ended), idle_thread (an idle thread
-- at a step boundary). Reads cp_syncs; writes nothing.
SELECT how, count(*) AS n FROM cp_syncs GROUP BY how ORDER BY how;
