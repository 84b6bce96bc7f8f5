-- The first matched end of clocks/ends.sql's clk_ends (NULL: none), the reference time of
-- the offsets. No parameters.
SELECT min(e) FROM clk_ends
