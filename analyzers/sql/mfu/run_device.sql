-- The device names of run $run's ranks, most common first, with one rank's
-- deviceProperties and whether any rank ran GPU ops. Reads ranks. Parameter: $run.
SELECT device_name, any_value(device_properties) AS props, count(*) AS n,
       bool_or(device IS NOT NULL) AS has_gpu
FROM ranks WHERE run = $run GROUP BY device_name ORDER BY n DESC;
