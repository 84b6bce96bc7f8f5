-- Drops what attribution/collective_match.sql and its per-batch steps made, once every
-- batch's collective_waits are written. No parameters.
DROP TABLE IF EXISTS a_inst;
DROP TABLE IF EXISTS a_inst_part;
DROP TABLE a_step_order;
DROP TABLE a_lib_calls;
DROP TABLE a_lib_groups;
DROP MACRO TABLE a_coll;
