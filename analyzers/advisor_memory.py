"""The advisor's checks that read the memory and all_to_all sections (docs/advisor.md):
the memory notes of the ZeRO and recompute advice (measured peak memory against the
device, the planner's fit rule: at most MEMORY_HEADROOM of device memory) and the
all_to_all imbalance advice (`a2a-imbalance`: its wording and gain; advisor.py turns
them into the recommendation). It reads the advisor's Evidence through the Protocol
below, so that it does not import the advisor that imports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from stepscope.analyzers.model import (
    AllToAll,
    AllToAllGroup,
    Layout,
    MemorySection,
    Pipeline,
    RankMemory,
    Straggler,
)
from stepscope.analyzers.planner import MEMORY_HEADROOM, zero_state_bytes_per_param
from stepscope.analyzers.spec import ModelSpec


class Evidence(Protocol):
    """What these checks read of analyzers.advisor.Evidence."""

    @property
    def memory(self) -> MemorySection | None: ...
    @property
    def all_to_all(self) -> AllToAll | None: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def pipeline(self) -> Pipeline | None: ...
    @property
    def stragglers(self) -> tuple[Straggler, ...]: ...
    @property
    def spec(self) -> ModelSpec | None: ...
    @property
    def device_memory_bytes(self) -> int | None: ...


@dataclass(frozen=True)
class A2aAdvice:
    """The a2a-imbalance recommendation's text and expected gain (ms per step)."""
    title: str
    detail: str
    evidence: str
    gain_ms: float

SELECTIVE_EXTRA = 32.0   # bytes per s*b*h/TP per layer: 34 kept (selective) - 2 (full)
A2A_DETAIL = (
    "The router sends these ranks' experts more tokens than the others': their expert "
    "GEMMs run longer, every other rank waits for them at the next exchange, and each "
    "all_to_all lasts as long as its busiest member. Balance the load: an auxiliary "
    "load-balancing loss or a loss-free expert bias (as DeepSeek-V3), a capacity factor "
    "that caps tokens per expert, or re-place / replicate the hot experts across ranks "
    "(expert-parallel load balancers do this from measured counts).")


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


def heaviest_rank_note(ev: Evidence, rank: int) -> str:
    """For the straggler advice: this rank receives the most all_to_all bytes."""
    a2a = ev.all_to_all
    if a2a is None:
        return ""
    row = next((r for r in a2a.ranks if r.rank == rank), None)
    if row is None or row.received_vs_mean < 1.1 or row.received_bytes < max(
            r.received_bytes for r in a2a.ranks):
        return ""
    return (f" It also receives the most all_to_all traffic ({row.received_vs_mean:.2f}x the "
            "mean rank): the others may be waiting for its experts' extra tokens rather "
            "than for a slow GPU (see a2a-imbalance).")


def _heavy_ranks(ev: Evidence) -> str:
    a2a = ev.all_to_all
    assert a2a is not None
    heavy = sorted((r for r in a2a.ranks if r.received_vs_mean >= 1.1),
                   key=lambda r: -r.received_bytes)[:4]
    return ", ".join(f"rank {r.rank} ({r.received_vs_mean:.2f}x the mean"
                     + (f", {r.tokens_received:,.0f} tokens/step" if r.tokens_received else "")
                     + ")" for r in heavy)


def a2a_imbalance(ev: Evidence) -> A2aAdvice | None:
    """all_to_all whose members move uneven bytes (MoE routing, embedding shards): the
    transfer time the imbalance costs, plus the others' wait when the rank they wait for
    is the one that receives the most. None without an imbalanced group."""
    a2a = ev.all_to_all
    if a2a is None or not a2a.groups:
        return None
    rows = [g for g in a2a.groups if g.imbalance is not None and g.imbalance >= 1.1]
    if not rows:
        return None
    heaviest = {g.heaviest_rank for g in rows if g.heaviest_rank is not None}
    waited_on = {s.rank for s in ev.stragglers}
    gain = sum(g.imbalance_cost_ms + (g.wait_ms if g.heaviest_rank in waited_on else 0.0)
               for g in rows)
    worst: AllToAllGroup = max(rows, key=lambda g: g.imbalance_cost_ms + g.wait_ms)
    who = _heavy_ranks(ev) or ", ".join(f"rank {r}" for r in sorted(heaviest))
    return A2aAdvice(
        title=f"Balance the all_to_all load: {who.split(' (')[0]} receives the most",
        detail=f"Ranks that receive the most: {who}. " + A2A_DETAIL,
        evidence=(f"{worst.group_label}: {worst.calls_per_step:.0f} calls/step, imbalance "
                  f"{worst.imbalance:.2f}x the mean bytes (max {worst.imbalance_max:.2f}x); "
                  f"transfer {worst.transfer_ms:.2f} ms/step of which "
                  f"{worst.imbalance_cost_ms:.2f} ms is the imbalance; ranks wait "
                  f"{worst.wait_ms:.2f} ms/step in these calls for the last member"),
        gain_ms=gain)
