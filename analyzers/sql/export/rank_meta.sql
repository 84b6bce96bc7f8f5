-- Per exported rank, what its own trace said of itself (the export's otherData, so that
-- the file can be split back into one Kineto trace per rank): host, the trace's pid,
-- distributedInfo, deviceProperties, backend, and the aligned clock's correction.
-- distributedInfo is the trace's own: each group's rank list that the ingest stored as
-- {"stepscope_range": [first, step, count]} (ingest/rank_lists.py) is put back as the
-- list, in its place; an object without one is passed as stored.
-- Reads x_ranks (export/scope.sql). Parameters: $run.
WITH stored AS (
    SELECT r.rank, r.host, r.offset_ns, r.drift_ppm, k.pid, k.device_properties, k.device,
           CAST(k.distributed_info AS VARCHAR) AS info,
           '\{"stepscope_range": \[(-?\d+), (-?\d+), (\d+)\]\}' AS range_pattern
    FROM x_ranks r JOIN ranks k ON k.run = $run AND k.rank = r.rank
), split AS (
    SELECT *, regexp_split_to_array(info, range_pattern) AS pieces,
           list_transform(regexp_extract_all(info, range_pattern, 0),
                          lambda m: CAST(m ->> '$.stepscope_range' AS BIGINT[])) AS spans
    FROM stored WHERE contains(info, '"stepscope_range"')
), expanded AS (
    SELECT rank, pieces[1] || array_to_string(list_transform(
               range(1, len(pieces)),
               lambda i: '[' || array_to_string(list_transform(
                   range(spans[i][3]), lambda j: spans[i][1] + j * spans[i][2]), ', ')
                   || ']' || pieces[i + 1]), '') AS info
    FROM split
)
SELECT s.rank, CAST(json_object(
    'host_name', s.host, 'pid', s.pid,
    'distributedInfo', CAST(coalesce(e.info, s.info) AS JSON),
    'deviceProperties', s.device_properties, 'device', s.device,
    'offset_ns', s.offset_ns, 'drift_ppm', s.drift_ppm) AS VARCHAR)
FROM stored s LEFT JOIN expanded e USING (rank)
ORDER BY s.rank
