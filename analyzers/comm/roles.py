"""What each collective is for (docs/advisor.md, "Collective roles"), so that advice fits.

Megatron-style group descriptions say it outright (`role_source = label`), and so do the
kernels of the communication-kernel table that carry a role (DeepEP dispatch/combine:
expert_exchange; `role_source = kernel_table`). Without them the role is guessed from the
op and its group (`role_source = guess`):

* send / recv                                  -> pipeline (stage-to-stage activations);
* all_to_all                                   -> embedding_or_expert_exchange (DLRM
  embedding tables, MoE token dispatch: model-parallel traffic, not gradients);
* all_gather and reduce_scatter, both several times per step -> fsdp_shards (FSDP /
  ZeRO-3 gathering weights before and reducing gradients after each layer);
* reduce_scatter alone                         -> dp_gradients (ZeRO-2 style);
* all_reduce over all ranks, or over the DP degree, or in a run without model
  parallelism                                  -> dp_gradients;
* all_reduce over the TP degree (TP > 1)       -> tensor_parallel;
* broadcast                                    -> parameter_broadcast;
* anything else                                -> unknown.
"""

from __future__ import annotations

import msgspec

from stepscope.analyzers.results import CollectiveStat, Layout

LABELS = (
    ("TENSOR", "tensor_parallel"),
    ("PIPELINE", "pipeline"),
    ("CONTEXT", "context_parallel"),
    ("EXPERT", "expert_exchange"),
    ("EMBD", "embedding_or_expert_exchange"),
    ("EMBEDDING", "embedding_or_expert_exchange"),
    ("DATA", "dp_gradients"),
)
# Roles whose exposed time the data-parallel advice is about.
DATA_PARALLEL_ROLES = frozenset({"dp_gradients", "fsdp_shards", "dp_param_gather"})
# all_to_all whose purpose is not known (DLRM embeddings or MoE tokens): exposed-a2a-comm.
MODEL_EXCHANGE_ROLES = frozenset({"embedding_or_expert_exchange"})
# Expert-parallel token dispatch/combine (EXPERT groups, DeepEP kernels): exposed-ep-comm.
EXPERT_ROLES = frozenset({"expert_exchange"})


def _from_label(row: CollectiveStat) -> str | None:
    label = (row.group_label or "").upper()
    for marker, role in LABELS:
        if marker in label:
            if role == "dp_gradients" and row.collective == "all_gather":
                return "dp_param_gather"  # distributed optimizer / ZeRO: gather updated weights
            return role
    return None


def _fsdp_pattern(rows: tuple[CollectiveStat, ...]) -> bool:
    """Unlabelled all_gather and reduce_scatter, each at least twice per step (per layer)."""
    calls = {c: sum(r.calls_per_step or 0 for r in rows if r.collective == c
                    and _from_label(r) is None)
             for c in ("all_gather", "reduce_scatter")}
    return all(n >= 2 for n in calls.values())


def _guess(row: CollectiveStat, fsdp: bool, world: int, layout: Layout) -> str:
    op, size = row.collective, row.group_size
    tp = layout.tp or 1
    model_parallel = tp * (layout.pp or 1) * (layout.cp or 1) > 1
    if row.is_p2p or op in ("send", "recv", "send_recv"):
        return "pipeline"
    if op == "all_to_all":
        return "embedding_or_expert_exchange"
    if op in ("all_gather", "reduce_scatter") and fsdp:
        return "fsdp_shards"
    if op == "reduce_scatter":
        return "dp_gradients"
    if op == "all_reduce":
        if tp > 1 and size == tp and size != world:
            return "tensor_parallel"
        if size is None or size == world or not model_parallel or size == layout.dp:
            return "dp_gradients"
    if op == "broadcast":
        return "parameter_broadcast"
    return "unknown"


def assign_roles(rows: tuple[CollectiveStat, ...], world: int,
                 layout: Layout) -> tuple[CollectiveStat, ...]:
    """Each collective_stats row with its `role` and `role_source` (`label` or `guess`)."""
    fsdp = _fsdp_pattern(rows)
    out = []
    for row in rows:
        if row.role_source == "kernel_table":  # the kernel's library says it
            out.append(row)
            continue
        labelled = _from_label(row)
        out.append(msgspec.structs.replace(
            row, role=labelled or _guess(row, fsdp, world, layout),
            role_source="label" if labelled else "guess"))
    return tuple(out)
