-- How many host ends clocks/ends.sql gathered (clk_ends), which size the fit's room
-- (analyzers/clocks.py, END_BYTES). No parameters.
SELECT count(*) FROM clk_ends
