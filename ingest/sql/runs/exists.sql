-- 1 when the database holds run $run, else 0. Reads runs; writes nothing.
SELECT count(*) AS n FROM runs WHERE run = $run
