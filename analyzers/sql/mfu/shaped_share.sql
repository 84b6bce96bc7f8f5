-- The compute-kernel time of the complete steps in ops with shapes, and all of it, summed
-- over ranks (docs/mfu.md, "What the MFU covers"): the roofline's coverage. Reads
-- rf_kernels (roofline/kernels.sql: one row per compute kernel of the run's complete
-- steps, kind 'unshaped' when neither its op nor the op's parent or grandparent is a
-- shaped op). No parameters.
SELECT sum(dur_ns) FILTER (WHERE kind <> 'unshaped') AS shaped_ns, sum(dur_ns) AS total_ns
FROM rf_kernels;
