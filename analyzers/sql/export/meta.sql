-- Metadata events of the export (Chrome trace-event format): per rank a process
-- `rank N (host)` sorted by rank; a thread per CPU thread (its thread_name) and per GPU
-- stream (`stream S (GPU D)`), and the overlay threads (breakdown, critical path) named
-- and sorted first. GPU streams' tids are 2^40 + device * 2^24 + stream; the overlays'
-- 2^41 and 2^41 + 1. Reads x_ranks (export/scope.sql). Parameters: $run.
WITH cpu_threads AS (
    SELECT DISTINCT o.rank, o.tid FROM cpu_ops o JOIN x_ranks USING (rank)
    WHERE o.run = $run AND o.tid IS NOT NULL
), names AS (
    SELECT rank, tid, any_value(thread_name) AS thread_name FROM threads
    WHERE run = $run GROUP BY rank, tid
), streams AS (
    SELECT DISTINCT g.rank, coalesce(g.device, 0) AS device, g.stream
    FROM gpu_ops g JOIN x_ranks USING (rank) WHERE g.run = $run AND g.stream IS NOT NULL
), events AS (
    SELECT rank AS pid, NULL::BIGINT AS tid, 'process_name' AS name,
        json_object('name', 'rank ' || rank || ' (' || coalesce(host, '?') || ')') AS args
    FROM x_ranks
    UNION ALL SELECT rank, NULL, 'process_sort_index', json_object('sort_index', rank)
    FROM x_ranks
    UNION ALL SELECT c.rank, c.tid, 'thread_name',
        json_object('name', coalesce(n.thread_name, 'thread ' || c.tid))
    FROM cpu_threads c LEFT JOIN names n USING (rank, tid)
    UNION ALL SELECT rank, (1::BIGINT << 40) + device * (1 << 24) + stream, 'thread_name',
        json_object('name', 'stream ' || stream || ' (GPU ' || device || ')') FROM streams
    UNION ALL SELECT rank, 1::BIGINT << 41, 'thread_name',
        json_object('name', 'breakdown (stepscope)') FROM x_ranks
    UNION ALL SELECT rank, (1::BIGINT << 41) + 1, 'thread_name',
        json_object('name', 'critical path (stepscope)') FROM x_ranks
    UNION ALL SELECT rank, 1::BIGINT << 41, 'thread_sort_index', json_object('sort_index', -2)
    FROM x_ranks
    UNION ALL SELECT rank, (1::BIGINT << 41) + 1, 'thread_sort_index',
        json_object('sort_index', -1) FROM x_ranks
)
SELECT CAST(json_object('ph', 'M', 'name', name, 'pid', pid, 'tid', coalesce(tid, 0),
                        'args', args) AS VARCHAR) AS ev
FROM events
ORDER BY pid, coalesce(tid, 0), name, ev  -- one order, whatever DuckDB's threads did
