-- What `stepscope export` writes of run $run (docs/timeline.md, "Export"): the ranks
-- ($ranks: INTEGER[], NULL for all) with their host and clock correction (rank_clocks),
-- the steps ($steps: INTEGER[], NULL for all), the origin of the exported clock (the
-- first aligned start of a chosen step window) and the macro x_us that puts a rank's time
-- on it in µs. Writes temp tables x_ranks, x_steps, x_origin and the macro x_us.
-- Parameters: $run, $ranks, $steps.
CREATE OR REPLACE TEMP TABLE x_ranks AS
SELECT r.rank, r.host, k.offset_ns, k.drift_ppm, k.ref_ns
FROM ranks r JOIN rank_clocks k ON k.run = r.run AND k.rank = r.rank
WHERE r.run = $run AND ($ranks IS NULL OR list_contains($ranks, r.rank));

CREATE OR REPLACE TEMP TABLE x_steps AS
SELECT DISTINCT a.rank, a.step, a.window_start_ns AS ws, a.window_end_ns AS we
FROM step_attribution a JOIN x_ranks USING (rank)
WHERE a.run = $run AND ($steps IS NULL OR list_contains($steps, a.step));

-- a time t of a rank on the common clock, in µs from x_origin (3 decimals: ns)
CREATE OR REPLACE TEMP MACRO x_us(t, off, drift, ref, origin) AS
    round(CAST(t - off - origin AS DOUBLE) / 1000.0 - drift * 1e-9 * (t - ref), 3);

CREATE OR REPLACE TEMP TABLE x_origin AS
SELECT coalesce(min(s.ws - r.offset_ns - CAST(r.drift_ppm * 1e-6 * (s.ws - r.ref_ns) AS BIGINT)),
                0) AS origin
FROM x_steps s JOIN x_ranks r USING (rank);
