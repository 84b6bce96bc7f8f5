"""Parallel layout of a run: TP/PP/DP/CP/EP, GPUs per node and nodes, whose factors
multiply out to the world size (docs/attribution.md, "Layout"); when the evidence
conflicts, `Layout.notes` says which source won and why."""

from __future__ import annotations

import math
from collections.abc import Iterable

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.analyzers.results import Layout

# Process-group descriptions -> the degrees whose product is the group's size: Megatron-core
# `group_desc` names, and torch DeviceMesh's `mesh_<dim name>` (torchtitan's dims).
GROUP_FACTORS: dict[str, tuple[str, ...]] = {
    "TENSOR_MODEL_PARALLEL_GROUP": ("tp",),
    "PIPELINE_MODEL_PARALLEL_GROUP": ("pp",),
    "CONTEXT_PARALLEL_GROUP": ("cp",),
    "DATA_PARALLEL_GROUP": ("dp",),
    "EXPERT_MODEL_PARALLEL_GROUP": ("ep",),
    "DATA_PARALLEL_GROUP_WITH_CP": ("dp", "cp"),
    "TENSOR_AND_CONTEXT_PARALLEL_GROUP": ("tp", "cp"),
    "TENSOR_AND_DATA_PARALLEL_GROUP": ("tp", "dp"),
    "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP": ("tp", "dp", "cp"),
    "MODEL_PARALLEL_GROUP": ("tp", "pp"),
    "MESH_TP": ("tp",),
    "MESH_PP": ("pp",),
    "MESH_CP": ("cp",),
    "MESH_EP": ("ep",),
    "MESH_DP": ("dp",),
    "MESH_DP_CP": ("dp", "cp"),
    "MESH_DP_SHARD_CP": ("dp_shard", "cp"),
    "MESH_DP_SHARD": ("dp_shard",),
    "MESH_DP_REPLICATE": ("dp_replicate",),
}
MODEL_FACTORS = ("tp", "pp", "dp", "cp")  # their product is the world size


def layout(con: duckdb.DuckDBPyConnection, run: str, world_size: int,
           pipeline_stages: int | None) -> Layout:
    """Degrees from process-group descriptions and sizes, PP from the point-to-point
    pattern and DP from what is left of the world when no group names them; nodes from
    the run_nodes view. Factors that do not multiply out are never shown as a layout."""
    groups = con.sql(sql("layout/groups.sql"), params={"run": run}).fetchall()
    known, notes = group_degrees((str(d), int(s)) for d, s in groups if d and s)
    named = bool(known)
    if "ep" not in known:
        _deepep_ep(con, run, known, notes)
    degrees, source = _resolve(known, world_size, pipeline_stages, notes)
    source = source if named else "inferred"
    row = next(iter(con.execute(sql("layout/hosts.sql"), {"run": run}).fetchall()), None)
    if row is None:  # no profiler trace: the NCCL logs, if any, give the nodes
        nodes, per_node, node_gpus, host_source, node_source = _nccl_nodes(
            con, run, world_size, notes)
        if nodes is not None and not named:
            _nccl_degrees_note(con, run, notes)
    else:
        nodes, per_node, node_gpus, host_source, node_source = _nodes(row, world_size, notes)
    host_notes = con.execute(sql("layout/host_notes.sql"), {"run": run}).fetchall()
    notes += [note if n == 1 else f"{note} (and {n - 1} more rank(s) alike)"
              for note, n in host_notes]
    product = math.prod(degrees[k] for k in MODEL_FACTORS)
    return Layout(tp=degrees["tp"], pp=degrees["pp"], dp=degrees["dp"], cp=degrees["cp"],
                  ep=degrees["ep"], gpus_per_node=per_node, nodes=nodes,
                  host_source=host_source, source=source,
                  consistent=world_size <= 0 or product == world_size,
                  node_gpus=node_gpus, node_source=node_source, notes=tuple(notes))


# GPUs per node DeepEP's internode kernels address over NVLink (NUM_MAX_NVL_PEERS in
# deepseek-ai/DeepEP csrc/kernels/configs.cuh): a rank's node is rank / 8.
DEEPEP_NVL_PEERS = 8


def _deepep_ep(con: duckdb.DuckDBPyConnection, run: str, known: dict[str, int],
               notes: list[str]) -> None:
    """EP from DeepEP's internode kernels when no EXPERT group names it: they exchange
    tokens among kNumRDMARanks nodes x DEEPEP_NVL_PEERS GPUs, the expert-parallel group."""
    row = con.execute(sql("layout/deepep_ep.sql"), {"run": run}).fetchone()
    rdma_ranks = None if row is None or row[0] is None else int(row[0])
    if rdma_ranks is None or rdma_ranks < 1:
        return
    known["ep"] = rdma_ranks * DEEPEP_NVL_PEERS
    notes.append(f"EP {known['ep']} inferred from DeepEP's internode kernels (expert "
                 f"exchange; no expert-parallel process group in the traces): "
                 f"notify_dispatch<..., {rdma_ranks}> runs on {rdma_ranks} nodes x "
                 f"{DEEPEP_NVL_PEERS} NVLink peers")


def group_degrees(groups: Iterable[tuple[str, int]]) -> tuple[dict[str, int], list[str]]:
    """Degrees named by group descriptions: single-factor groups first, then each
    composite group gives its one unknown factor (size / the known ones); and a note per
    composite group whose size disagrees with the degrees (the single-factor groups win)."""
    sizes: dict[tuple[str, ...], int] = {}
    for desc, size in groups:
        factors = GROUP_FACTORS.get(desc.upper())
        if factors:
            sizes[factors] = max(sizes.get(factors, 0), size)
    known = {f[0]: s for f, s in sizes.items() if len(f) == 1}
    for _ in range(len(sizes)):
        for factors, size in sizes.items():
            unknown = [f for f in factors if f not in known]
            rest = math.prod(known[f] for f in factors if f in known)
            if len(unknown) == 1 and rest and size % rest == 0:
                known[unknown[0]] = size // rest
    if "dp" not in known and {"dp_shard", "dp_replicate"} & set(known):
        known["dp"] = known.get("dp_shard", 1) * known.get("dp_replicate", 1)
    notes = [f"a group of {' x '.join(f.upper() for f in factors)} has {size} ranks, not "
             f"{math.prod(known[f] for f in factors)}: the degrees of the single groups win"
             for factors, size in sizes.items()
             if len(factors) > 1 and all(f in known for f in factors)
             and math.prod(known[f] for f in factors) != size]
    return known, notes


def _resolve(known: dict[str, int], world: int, stages: int | None,
             notes: list[str]) -> tuple[dict[str, int], str]:
    """TP/PP/DP/CP/EP whose product TP*PP*DP*CP is the world size; the world size
    (distributedInfo) wins over a group's size, and says so."""
    source = "process_group_descriptions" if known else "inferred"
    degrees = {k: known.get(k, 1) for k in ("tp", "cp", "ep")}
    degrees["pp"] = known.get("pp") or stages or 1
    model = degrees["tp"] * degrees["pp"] * degrees["cp"]
    if "dp" in known:
        degrees["dp"] = known["dp"]
    else:
        degrees["dp"] = max(1, world // model) if world > 0 else 1
    product = model * degrees["dp"]
    if world > 0 and product != world:
        if world % model == 0:
            named = "the DATA_PARALLEL group's size" if "dp" in known else "DP"
            notes.append(f"TP {degrees['tp']} x PP {degrees['pp']} x DP {degrees['dp']} x "
                         f"CP {degrees['cp']} = {product} is not the world size {world}: "
                         f"the world size (distributedInfo) wins over {named}, DP = "
                         f"{world // model}")
            degrees["dp"] = world // model
        else:
            notes.append(f"TP {degrees['tp']} x PP {degrees['pp']} x CP {degrees['cp']} = "
                         f"{model} does not divide the world size {world}: the process-group "
                         "sizes contradict it, so no layout is shown")
    if world > 0 and degrees["ep"] > 1 and world % degrees["ep"]:
        notes.append(f"EP {degrees['ep']} does not divide the world size {world}")
    return degrees, source


def _nodes(row: tuple[object, ...] | None, world: int, notes: list[str]
           ) -> tuple[int | None, int | None, int | None, str | None, str | None]:
    """(nodes, gpus_per_node, node_gpus, host_source, node_source) from the run_nodes
    row, with a note where the evidence conflicts or is partial."""
    if row is None:
        return None, None, None, None, None
    nodes, per_node, node_gpus, host_source, node_source, seen, hosts, shared = row
    n = None if nodes is None else int(str(nodes))
    g = None if per_node is None else int(str(per_node))
    gpus = None if node_gpus is None else int(str(node_gpus))
    seen_n, hosts_n = int(str(seen or 0)), int(str(hosts or 0))
    if n is not None and g is not None and world > 0 and n * g != world:
        g = None  # never print factors that do not multiply out (run_nodes should not give it)
    if node_source == "device_properties" and shared:
        notes.append(f"the host names put ranks that use the same GPU index on one host, "
                     f"but each node has {gpus} GPUs: deviceProperties win (two ranks do "
                     f"not share a GPU), {n} node(s) of {g or '?'} GPUs")
    elif node_source == "device_properties" and 0 < seen_n < world and (n or 0) > hosts_n:
        notes.append(f"{n} node(s) of {g or '?'} GPUs from the world size {world} and the "
                     f"{gpus} GPUs per node in deviceProperties; the {seen_n} rank(s) traced "
                     f"ran on {hosts_n or '?'} host(s)")
    elif node_source == "host_names_uneven":
        notes.append(f"the {n} hosts hold different numbers of ranks: no GPUs per node")
    return n, g, gpus, None if host_source is None else str(host_source), \
        None if node_source is None else str(node_source)


NCCL_LOGS = "nccl_logs"  # Layout.node_source / host_source of a run known from its NCCL logs


def _nccl_nodes(con: duckdb.DuckDBPyConnection, run: str, world: int, notes: list[str]
                ) -> tuple[int | None, int | None, int | None, str | None, str | None]:
    """(nodes, gpus_per_node, node_gpus, host_source, node_source) of a run without
    profiler traces from its largest NCCL communicator: nNodes nodes of localRanks GPUs
    (only when every member logged the same and they multiply out to the world size),
    with a note naming the communicator, its CUDA devices and bus ids."""
    row = con.execute(sql("layout/nccl_nodes.sql"), {"run": run}).fetchone()
    if row is None or row[2] is None:
        return None, None, None, None, None
    comm_id, nranks, nnodes, min_nnodes, min_local, local, hosts, devs, buses, _ = row
    even = min_local == local and min_nnodes == nnodes and local is not None
    per_node = int(local) if even and int(nnodes) * int(local) == world else None
    notes.append(f"nodes from the NCCL logs: communicator {comm_id} ({nranks} ranks) logged "
                 f"nNodes {nnodes}, localRanks {_span(min_local, local)} on {hosts} "
                 f"logging host(s); CUDA devices {', '.join(map(str, devs or [])) or '?'}; "
                 f"bus ids {', '.join(buses or []) or '?'}")
    return int(nnodes), per_node, None, NCCL_LOGS, NCCL_LOGS


def _span(low: object, high: object) -> str:
    return str(high) if low == high else f"{low}-{high}"


def _nccl_degrees_note(con: duckdb.DuckDBPyConnection, run: str, notes: list[str]) -> None:
    """Say that a run known only from its NCCL logs has no named degrees: communicators
    carry sizes, not what they are for, so DP is the world size by default."""
    sizes = con.execute(sql("layout/nccl_comm_sizes.sql"), {"run": run}).fetchall()
    held = ", ".join(f"{n} of {size} ranks" for size, n in sizes)
    notes.append("no profiler traces: the NCCL logs name no parallel dimension (a "
                 "communicator has a size, not a purpose), so TP, PP, CP and EP are 1 and DP "
                 f"the world size by default; the logs hold communicators: {held}")
