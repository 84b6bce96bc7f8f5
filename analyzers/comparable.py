"""What makes two runs comparable for Compare's default baseline: the same model spec
(model.json beside the traces), else the same op shapes on every rank (record_shapes).
Model FLOPs per step alone do not decide: two different models (100M parameters and 2
layers vs 50M and 1 layer) can do the same FLOPs per step."""

from __future__ import annotations

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.flops.run_spec import find_spec

# Two runs have the same op shapes per rank when their (op, input dims) sets overlap
# this much (Jaccard): a stray op recorded on one side does not split a job from itself.
SHAPE_OVERLAP = 0.9


def model_spec(con: duckdb.DuckDBPyConnection, run: str) -> ModelSpec | None:
    """The run's model spec from model.json beside its traces, or None."""
    found = find_spec(con, run)
    return found[0] if found is not None else None


def op_shapes(con: duckdb.DuckDBPyConnection, run: str) -> frozenset[tuple[str, str]]:
    """The distinct (op name, input dims) the run's ranks recorded (empty without shapes):
    a rank's work, so DP 8 and DP 16 of one model agree and TP 2 and TP 4 do not."""
    rows = con.execute(sql("compare/op_shapes.sql"), {"run": run}).fetchall()
    return frozenset((str(n), str(d)) for n, d in rows)


def same_shapes(a: frozenset[tuple[str, str]], b: frozenset[tuple[str, str]]) -> bool:
    """Both recorded shapes and their per-rank shape sets overlap by SHAPE_OVERLAP."""
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= SHAPE_OVERLAP


def gpus_per_node(con: duckdb.DuckDBPyConnection, run: str) -> int | None:
    """The run's GPUs per node (run_nodes), None when unknown or uneven."""
    rows = con.execute(sql("compare/gpus_per_node.sql"), {"run": run}).fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else None
