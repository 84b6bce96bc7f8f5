"""The advisor's checks that read the memory section (docs/advisor.md): the memory
notes of the ZeRO and recompute advice (measured peak memory against the device, the
planner's fit rule: at most MEMORY_HEADROOM of device memory). It reads the advisor's
Evidence through the Protocol below, so that it does not import the advisor that
imports it (the all_to_all advice is analyzers/advice/alltoall.py)."""

from __future__ import annotations

from typing import Protocol

from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.plan.layouts import MEMORY_HEADROOM, zero_state_bytes_per_param
from stepscope.analyzers.results import (
    Layout,
    MemorySection,
    Pipeline,
    RankMemory,
)


class Evidence(Protocol):
    """What these checks read of analyzers.advice.recommend.Evidence."""

    @property
    def memory(self) -> MemorySection | None: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def pipeline(self) -> Pipeline | None: ...
    @property
    def spec(self) -> ModelSpec | None: ...
    @property
    def device_memory_bytes(self) -> int | None: ...


SELECTIVE_EXTRA = 32.0   # bytes per s*b*h/TP per layer: 34 kept (selective) - 2 (full)


def _gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB"


def _top(ev: Evidence) -> RankMemory | None:
    mem = ev.memory
    if mem is None or mem.source != "totals":
        return None
    return next((r for r in mem.ranks if r.rank == mem.peak_rank), None)


def measured_note(ev: Evidence) -> str:
    """The measured peak in words ('' without memory events or device memory)."""
    top = _top(ev)
    if top is None or top.peak_reserved_bytes is None or not top.device_memory_bytes:
        return ""
    return (f"measured peak reserved {_gb(top.peak_reserved_bytes)} of "
            f"{_gb(top.device_memory_bytes)} on rank {top.rank} (allocated "
            f"{_gb(top.peak_allocated_bytes)}, step {top.peak_step})")


def zero_memory_note(ev: Evidence, current_stage: int) -> str:
    """The ZeRO advice's memory check: with a spec, the training state per stage and,
    with measured memory, the smallest stage that fits (peak reserved - today's state +
    that stage's state <= MEMORY_HEADROOM x device memory); without a spec, what was
    measured."""
    spec, lay, top = ev.spec, ev.layout, _top(ev)
    measured = measured_note(ev)
    if spec is None:
        if measured:
            return (f" Memory check: {measured}; the training state's share is unknown "
                    "without a model spec (--model), so the ZeRO stage that fits is not "
                    "checked.")
        return (" Memory check: no model spec (--model) or memory events in the traces "
                "(profile_memory=True), so the ZeRO stage that fits is not checked.")
    shard = spec.n_params / (lay.tp * lay.pp)
    states = {stage: zero_state_bytes_per_param(stage, lay.dp) * shard for stage in range(4)}
    parts = ", ".join(f"ZeRO-{stage} {_gb(b)}" for stage, b in states.items())
    mem = ev.device_memory_bytes
    if top is None or top.peak_reserved_bytes is None or not top.device_memory_bytes:
        where = f" of {_gb(mem)}" if mem else ""
        return (f" Memory check (training state per GPU, before activations{where}): "
                f"{parts}; no memory events (profile_memory=True) to check what fits.")
    limit = MEMORY_HEADROOM * top.device_memory_bytes
    rest = top.peak_reserved_bytes - states[current_stage]
    fits = [s for s in range(4) if rest + states[s] <= limit]
    verdict = (f"ZeRO-{fits[0]} is the first stage that fits ({_gb(rest + states[fits[0]])} "
               f"predicted, at most {100 * MEMORY_HEADROOM:.0f}% of the device)" if fits
               else f"no ZeRO stage fits in {100 * MEMORY_HEADROOM:.0f}% of the device")
    return (f" Memory check: {measured}; training state per GPU {parts} (today taken as "
            f"ZeRO-{current_stage}); {verdict}.")


def recompute_memory_note(ev: Evidence) -> str:
    """The recompute advice's memory check: selective recomputation keeps
    SELECTIVE_EXTRA*s*b*h/TP more bytes per layer and micro-batch in flight; with a spec
    and measured memory, whether that fits within MEMORY_HEADROOM of the device."""
    measured = measured_note(ev)
    if not measured:
        return (" Memory check: the traces carry no memory events (profile_memory off); "
                "with selective recompute, activations take about 34*s*b*h/TP bytes per "
                "layer and micro-batch, so verify they fit before switching.")
    top = _top(ev)
    spec, lay = ev.spec, ev.layout
    assert top is not None and top.peak_reserved_bytes is not None and top.device_memory_bytes
    if spec is None:
        return (f" Memory check: {measured}; selective recompute keeps about 32*s*b*h/TP "
                "bytes more per layer and micro-batch in flight (pass --model to size it).")
    pipe = ev.pipeline
    micro = pipe.microbatches if pipe else 1
    in_flight = min(lay.pp, micro)
    samples = spec.global_batch_tokens / (spec.seq_len * lay.dp * micro)
    extra = (SELECTIVE_EXTRA * spec.seq_len * samples * spec.hidden / lay.tp
             * spec.n_layers / lay.pp * in_flight)
    total = top.peak_reserved_bytes + extra
    fits = total <= MEMORY_HEADROOM * top.device_memory_bytes
    return (f" Memory check: {measured}; selective recompute adds about {_gb(extra)} "
            f"(32*s*b*h/TP per layer, {spec.n_layers // lay.pp} layers, {in_flight} "
            f"micro-batch(es) of {samples:g} samples in flight): {_gb(total)}, which "
            + ("fits" if fits else "does not fit") + f" in {100 * MEMORY_HEADROOM:.0f}% "
            "of the device.")
