"""Phases of a token exchange that run on one GPU and move no bytes between GPUs:
DeepEP's get_dispatch_layout counts the tokens per rank and per expert before the
dispatch sends them (deepseek-ai/DeepEP csrc/kernels/layout.cu). Their time is the
exchange's (issue 41 §11), but each rank runs its own: no instance across ranks, no
arrival order, no wait for a late rank, no link (issue 41, the layout kernels)."""

from __future__ import annotations

# (library, op) of the communication-kernel table (ingest/data/comm_kernels.json)
LOCAL_EXCHANGE_OPS = frozenset({("deepep", "layout")})


def local_op_keys() -> list[str]:
    """'library op' of each local phase, the form the attribution's SQL takes them in."""
    return sorted(f"{library} {op}" for library, op in LOCAL_EXCHANGE_OPS)
