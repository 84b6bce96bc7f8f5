-- The export's ranks (export/scope.sql's x_ranks) with their clock correction and the
-- export's origin (ns on the common clock). No parameters.
SELECT r.rank, r.offset_ns, r.drift_ppm, r.ref_ns, o.origin
FROM x_ranks r CROSS JOIN x_origin o ORDER BY r.rank
