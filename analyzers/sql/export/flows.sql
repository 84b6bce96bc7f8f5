-- The export's flows at collectives (docs/timeline.md): for every matched instance, from
-- each member that waited (collective_waits.wait_ns > 0) to the member that arrived last,
-- a flow from the start of the waiter's transfer to the start of the last arrival's (where
-- every member was present), both on the aligned clock, on the GPU stream (or the CPU
-- thread of a gloo collective) that ran it. Flow ids are unique within the file.
-- Reads x_ranks, x_steps, x_origin. Parameters: $run.
WITH w AS (
    SELECT w.instance_key, w.rank, w.wait_ns, w.arrived_last, c.collective,
        CASE WHEN c.stream IS NOT NULL
             THEN (1::BIGINT << 40) + coalesce(c.device, 0) * (1 << 24) + c.stream
             ELSE coalesce(c.work_tid, c.cpu_tid) END AS tid,
        x_us(c.work_start_ns, r.offset_ns, r.drift_ppm, r.ref_ns, o.origin) AS ts
    FROM collective_waits w
    JOIN collectives c ON c.run = w.run AND c.rank = w.rank AND c.coll_id = w.coll_id
    JOIN x_ranks r ON r.rank = w.rank
    CROSS JOIN x_origin o
    WHERE w.run = $run AND w.n_ranks > 1 AND w.match_method <> 'unmatched'
      AND c.work_start_ns IS NOT NULL
      AND EXISTS (SELECT 1 FROM x_steps s WHERE s.rank = c.rank AND s.step = c.step)
), last AS (
    SELECT instance_key, arg_min(rank, rank) AS rank, arg_min(tid, rank) AS tid,
        arg_min(ts, rank) AS ts
    FROM w WHERE arrived_last GROUP BY instance_key
), pairs AS (
    SELECT row_number() OVER (ORDER BY w.instance_key, w.rank) AS id, w.rank, w.tid, w.ts,
        l.rank AS last_rank, l.tid AS last_tid, greatest(l.ts, w.ts) AS last_ts,
        w.collective, w.wait_ns
    FROM w JOIN last l USING (instance_key)
    WHERE w.wait_ns > 0 AND w.rank <> l.rank
)
SELECT ev FROM (
    SELECT CAST(json_object('ph', 's', 'cat', 'waits for the last', 'id', id,
                            'name', collective || ': waits ' || round(wait_ns / 1000.0, 1)
                                    || ' µs for rank ' || last_rank,
                            'pid', rank, 'tid', tid, 'ts', ts) AS VARCHAR) AS ev, id, 0 AS side
    FROM pairs
    UNION ALL
    SELECT CAST(json_object('ph', 'f', 'bp', 'e', 'cat', 'waits for the last', 'id', id,
                            'name', collective || ': waits ' || round(wait_ns / 1000.0, 1)
                                    || ' µs for rank ' || last_rank,
                            'pid', last_rank, 'tid', last_tid, 'ts', last_ts) AS VARCHAR), id, 1
    FROM pairs
)
ORDER BY id, side  -- one order, whatever DuckDB's threads did
