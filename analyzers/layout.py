"""Parallel layout of a run: TP/PP/DP (CP/EP where visible), hosts and GPUs per node."""

from __future__ import annotations

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.analyzers.model import Layout

# (layout key, substring of Megatron-style process-group descriptions)
GROUP_MARKERS = (
    ("tp", "TENSOR_MODEL_PARALLEL"),
    ("pp", "PIPELINE_MODEL_PARALLEL"),
    ("cp", "CONTEXT_PARALLEL"),
    ("ep", "EXPERT_MODEL_PARALLEL"),
    ("dp", "DATA_PARALLEL"),
)



def layout(con: duckdb.DuckDBPyConnection, run: str, world_size: int,
           pipeline_stages: int | None) -> Layout:
    """Degrees from group descriptions when the framework labels them; otherwise PP from
    the point-to-point pattern and DP as what is left of the world."""
    groups = con.sql(sql("layout/groups.sql"), params={"run": run}).fetchall()
    degrees: dict[str, int | None] = {"tp": None, "pp": None, "dp": None, "cp": None, "ep": None}
    for desc, size in groups:
        for key, marker in GROUP_MARKERS:
            if desc and marker in desc.upper() and size:
                if key == "dp" and "CONTEXT" in desc.upper():
                    continue
                degrees[key] = max(degrees[key] or 0, int(size))
    source = "process_group_descriptions" if any(degrees.values()) else "inferred"
    if degrees["pp"] is None:
        degrees["pp"] = pipeline_stages or 1
    for key in ("tp", "cp", "ep"):
        degrees[key] = degrees[key] or 1
    if degrees["dp"] is None:
        model = (degrees["tp"] or 1) * (degrees["pp"] or 1) * (degrees["cp"] or 1)
        degrees["dp"] = max(1, world_size // model)
    nodes, per_node, host_source = next(
        iter(con.execute(sql("layout/hosts.sql"), {"run": run}).fetchall()), (None, None, None))
    return Layout(tp=degrees["tp"] or 1, pp=degrees["pp"] or 1, dp=degrees["dp"] or 1,
                  cp=degrees["cp"] or 1, ep=degrees["ep"] or 1,
                  gpus_per_node=None if per_node is None else int(per_node),
                  nodes=int(nodes) if nodes else None, host_source=host_source, source=source)
