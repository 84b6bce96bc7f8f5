-- Per exported rank, what its own trace said of itself (the export's otherData, so that
-- the file can be split back into one Kineto trace per rank): host, the trace's pid,
-- distributedInfo, deviceProperties, backend, and the aligned clock's correction.
-- Reads x_ranks (export/scope.sql). Parameters: $run.
SELECT r.rank, CAST(json_object(
    'host_name', r.host, 'pid', k.pid, 'distributedInfo', k.distributed_info,
    'deviceProperties', k.device_properties, 'device', k.device,
    'offset_ns', r.offset_ns, 'drift_ppm', r.drift_ppm) AS VARCHAR)
FROM x_ranks r JOIN ranks k ON k.run = $run AND k.rank = r.rank
ORDER BY r.rank
