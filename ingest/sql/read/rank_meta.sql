-- The one-row temp table `meta` that rank_tables.sql reads beside raw_events: the
-- trace's header values. Reads nothing; writes temp table meta.
-- Parameters: $base_ns (baseTimeNanoseconds, or NULL when the trace has none),
-- $distributed_info (the distributedInfo object as JSON text, or NULL),
-- $step_marker (the --step-marker annotation name, or NULL for ProfilerStep#N).
CREATE OR REPLACE TEMP TABLE meta AS
SELECT CAST($base_ns AS BIGINT) AS base_ns,
       CAST($distributed_info AS JSON) AS distributed_info,
       CAST($step_marker AS VARCHAR) AS step_marker;
