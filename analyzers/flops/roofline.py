"""Kernels against their roofline (docs/roofline.md).

With record_shapes, every GEMM, attention and convolution op has its FLOPs
(analyzers/sql/mfu/flops.sql) and every shaped op its least traffic in bytes
(analyzers/sql/roofline/kernels.sql). Per op kind, kernel and GEMM shape this module
turns the sums into achieved TFLOP/s and GB/s, arithmetic intensity I = FLOPs / bytes and
the share of the roof min(P, I x B) it reaches (P the peak FLOP/s of its dtype, B the
device's HBM bandwidth, both from analyzers/data/peaks.json). It then splits the MFU
waterfall's kernel-efficiency stage into named parts that add up to it exactly: with
T_c the compute time and F the model FLOPs per GPU and step, part g (its kernels' share
t_g of T_c, its model FLOPs f_g) loses 100 (t_g - f_g / P) / T_c points, and the model
FLOPs no traced kernel carries gain 100 (F - sum f_g) / (P T_c).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict, TypeVar

from stepscope.analyzers._memory import release
from stepscope.analyzers._sql import fetch_rows, run_script
from stepscope.analyzers.context import no_gpu_timeline
from stepscope.analyzers.flops.counted_ops import (
    RANKS_PER_BATCH,
    counted_ops,
    current_fill,
    rank_batches,
)
from stepscope.analyzers.flops.peaks import roof_dtype, table_version
from stepscope.analyzers.results import EfficiencyPart, Mfu, Roofline, RoofRow

if TYPE_CHECKING:
    import duckdb

    from stepscope.analyzers.context import RunContext
from stepscope.analyzers.flops.bound import rate_bound

GEMM_PARTS = 6          # GEMM shapes named in the waterfall; the rest are "other GEMMs"
GEMM_SHAPES_SHOWN = 20
KERNELS_SHOWN = 20
KIND_LABELS = {"gemm": "GEMMs", "attention": "attention", "conv": "convolutions",
               "elementwise": "elementwise ops", "normalization": "normalization ops"}


class _Group(TypedDict):
    """A row of analyzers/sql/roofline/groups.sql."""
    kind: str
    dtype: str | None
    op_name: str | None
    b: int | None
    m: int | None
    n: int | None
    k: int | None
    kernels: int
    time_ns: float
    flops: float
    bytes: float | None
    unsized_ns: float
    wf_time_ns: float
    wf_model_flops: float | None
    rank_steps: int
    untyped_elements: float
    untyped_ns: float


class _Kernel(TypedDict):
    """A row of analyzers/sql/roofline/top_kernels.sql."""
    kernel: str
    kind: str
    dtype: str | None
    kernels: int
    time_ns: float
    flops: float
    bytes: float | None
    unsized_ns: float
    untyped_elements: float
    untyped_ns: float


R = TypeVar("R", _Group, _Kernel)


@dataclass(frozen=True)
class Roofs:
    """The two roofs: peak FLOP/s per dtype (None: not in the table) and HBM bytes/s."""
    peaks: dict[str, float | None]
    default_peak: float | None      # the MFU's peak, for ops of unknown dtype
    hbm: float | None               # bytes/s
    dtype: str | None = None        # the MFU's dtype

    def peak(self, dtype: str | None) -> float | None:
        if dtype is None:
            return self.default_peak
        return self.peaks.get(dtype, self.default_peak)


@dataclass(frozen=True)
class _Sums:
    time_ns: float
    flops: float
    bytes: float | None             # None: some of the time has no known bytes
    kernels: int


def _roofs(ctx: RunContext, mfu: Mfu) -> Roofs:
    """Peaks per dtype from the device's table entry (the MFU's own for its dtype, and
    for all with --peak-tflops), HBM bandwidth from the table."""
    entry = ctx.device.peak
    forced = ctx.options.peak_tflops
    peaks: dict[str, float | None] = {}
    if forced is not None:
        peaks = dict.fromkeys(("bf16", "fp16", "fp8", "tf32", "fp32"), forced * 1e12)
    elif entry is not None:
        peaks = {d: entry.flops(roof_dtype(d, mfu.peak_dtype) or d) for d in entry.tflops}
    if mfu.dtype and mfu.peak_flops_per_gpu:
        peaks[mfu.dtype] = mfu.peak_flops_per_gpu
    hbm = entry.hbm_gbs * 1e9 if entry is not None and entry.hbm_gbs else None
    return Roofs(peaks=peaks, default_peak=mfu.peak_flops_per_gpu, hbm=hbm, dtype=mfu.dtype)


def _row(name: str, kind: str, dtype: str | None, sums: _Sums, roofs: Roofs,
         rank_steps: int, total_ns: float) -> RoofRow:
    """One row: rates from the sums, the roof that applies at its intensity."""
    secs = sums.time_ns / 1e9
    tflops = sums.flops / secs / 1e12 if secs and sums.flops else None
    gbs = sums.bytes / secs / 1e9 if secs and sums.bytes else None
    intensity = sums.flops / sums.bytes if sums.bytes else None
    bound, share = _roof_share(kind, sums, secs, roofs.peak(dtype), roofs.hbm)
    above = share if share is not None and share > 1 else None
    if above is not None:  # no kernel beats its roof: the counted work is not what ran
        share = None
    per_step = sums.time_ns / rank_steps / 1e6
    return RoofRow(
        name=name, kind=kind, dtype=dtype, time_ms=per_step,
        time_share=sums.time_ns / total_ns if total_ns else 0.0,
        kernels_per_step=sums.kernels / rank_steps, tflops=tflops, gbs=gbs,
        intensity=intensity, bound=bound, roof_share=share,
        lost_ms=per_step * (1 - share) if share is not None else None, above_roof=above)


def above_roof_reason(row: RoofRow) -> str:
    """Why a row's counted work claims more than its roof, in words (docs/roofline.md):
    convolutions count the direct convolution's FLOPs, which Winograd and FFT kernels do
    not execute (and traces without Concrete Inputs hide a stride, counted as 1); bytes
    above HBM bandwidth came from cache."""
    if row.bound == "memory":
        return "bytes above HBM bandwidth: served from cache (L2), not HBM"
    if row.kind == "conv":
        return ("FLOPs claimed above peak: algorithmic FLOPs, e.g. Winograd/FFT, or a "
                "stride the trace does not record (no Concrete Inputs: counted as 1)")
    return ("FLOPs claimed above peak: the op's counted FLOPs are not those its kernels "
            "executed, or the peak's dtype is not the one they ran in")


def _roof_share(kind: str, sums: _Sums, secs: float, peak: float | None,
                hbm: float | None) -> tuple[str, float | None]:
    """(bound, share of the roof): compute when I >= P / B (the ridge), memory below it;
    without bytes a FLOP-counted op is taken as compute-bound, others are unknown."""
    if not secs:
        return "unknown", None
    if sums.bytes and peak and hbm and sums.flops / sums.bytes < peak / hbm:
        return "memory", sums.bytes / secs / hbm
    if sums.flops and kind in ("gemm", "attention", "conv"):
        return "compute", sums.flops / secs / peak if peak else None
    if sums.bytes and kind in ("elementwise", "normalization"):
        return "memory", sums.bytes / secs / hbm if hbm else None
    return "unknown", None


def _sums(rows: list[_Group] | list[_Kernel]) -> _Sums:
    sized = all(r["bytes"] is not None and not r["unsized_ns"] for r in rows)
    return _Sums(time_ns=sum(float(r["time_ns"]) for r in rows),
                 flops=sum(float(r["flops"] or 0) for r in rows),
                 bytes=sum(float(r["bytes"] or 0) for r in rows) if sized else None,
                 kernels=sum(int(r["kernels"]) for r in rows))


FLOP_KINDS = ("gemm", "attention", "conv")


ELEMENT_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4, "fp64": 8}


def _with_dtype(rows: list[R], dtype: str | None) -> list[R]:
    """GEMM / attention / convolution rows without an `Input type` (traces before torch
    1.10 write none, nor do the simulated H100 sets) take the run's dtype, the one the MFU
    peak is for (docs/mfu.md), and their least traffic in elements becomes bytes at that
    dtype's size: without it their GB/s and FLOP/byte were unknown ("-") and the chart drew
    only the roofs."""
    for row in rows:
        if row["dtype"] is None and row["kind"] in FLOP_KINDS:
            row["dtype"] = dtype
            size = ELEMENT_BYTES.get(dtype or "")
            if size and row["untyped_ns"]:
                row["bytes"] = float(row["bytes"] or 0) + float(row["untyped_elements"]) * size
                row["unsized_ns"] = float(row["unsized_ns"]) - float(row["untyped_ns"])
    return rows


def shape_label(row: _Group) -> str:
    batch = f"{row['b']}x" if row["b"] and row["b"] != 1 else ""
    return f"{batch}{row['m']}x{row['n']}x{row['k']}"


def roofline_section(ctx: RunContext, mfu: Mfu) -> Roofline:
    """The `roofline` section of the report; a message says what cannot be computed."""
    base = Roofline(device=mfu.device, peak_table_version=table_version(),
                    peak_flops_per_gpu=mfu.peak_flops_per_gpu, peak_dtype=mfu.peak_dtype)
    if ctx.info.timeline != "gpu":
        return _replace(base, message=f"{no_gpu_timeline(ctx.info)}: no GPU kernels to hold "
                                      "against a roof")
    kernel_table(ctx.con, ctx.run, rate_bound(ctx))
    groups = _with_dtype(fetch_rows(ctx.con, "roofline/groups.sql", {"run": ctx.run}, _Group),
                         mfu.dtype)
    if not groups:
        return _replace(base, message="no GPU kernels in the complete steps")
    roofs = _roofs(ctx, mfu)
    entry = ctx.device.peak
    base = _replace(base, hbm_gbs=roofs.hbm / 1e9 if roofs.hbm else None,
                    hbm_source=entry.hbm_source if entry else None,
                    ridge_flops_per_byte=(mfu.peak_flops_per_gpu / roofs.hbm
                                          if roofs.hbm and mfu.peak_flops_per_gpu else None))
    shaped = [g for g in groups if g["kind"] != "unshaped"]
    total = sum(float(g["time_ns"]) for g in groups)
    rank_steps = int(groups[0]["rank_steps"])
    if not shaped:
        return _replace(base, message=(
            "no shaped ops: the traces have no `Input Dims` (profile with record_shapes=True), "
            "so no op's FLOPs or bytes are known"))
    kinds = _kind_rows(shaped, roofs, rank_steps, total)
    shapes = _shape_rows(shaped, roofs, rank_steps, total)
    kernels = _kernel_rows(ctx, roofs, rank_steps, total)
    parts, stage = efficiency_parts(ctx, mfu, groups, roofs, kinds)
    return _replace(
        base, coverage=sum(float(g["time_ns"]) for g in shaped) / total if total else 0.0,
        kinds=kinds, kernels=kernels,
        gemm_shapes=tuple(sorted(shapes, key=_most_lost)[:GEMM_SHAPES_SHOWN]),
        kernel_efficiency=parts, stage_points=stage,
        message=_message(mfu, roofs, parts, (*kinds, *shapes, *kernels), kinds))


_built: dict[int, tuple[str, float | None, int]] = {}  # connection -> rf_kernels' key


def kernel_table(con: duckdb.DuckDBPyConnection, run: str, max_rate: float | None,
                 ranks_per_batch: int = RANKS_PER_BATCH) -> None:
    """The temp table rf_kernels of `run` (roofline/kernels.sql), `ranks_per_batch` ranks
    per statement: the working memory of one batch, not of the whole run. Within one
    report (one fill of the counted ops, counted_ops.current_fill) it is built once, for
    the MFU's shaped share and the roofline both."""
    held = current_fill(con, run)
    if held is not None and _built.get(id(con)) == (run, max_rate, held):
        return
    with counted_ops(con, run):
        _fill_kernel_table(con, run, max_rate, ranks_per_batch)
        fill = current_fill(con, run)
        if fill is not None and held is not None:
            _built[id(con)] = (run, max_rate, fill)


def _fill_kernel_table(con: duckdb.DuckDBPyConnection, run: str, max_rate: float | None,
                       ranks_per_batch: int) -> None:
    """Fill rf_kernels, a batch of ranks at a time (kernel_table)."""
    run_script(con, "roofline/macros.sql", {})
    run_script(con, "roofline/kernels.sql", {})
    params = {"run": run, "max_rate": max_rate}
    run_script(con, "roofline/kernels_create.sql", params)
    for lo, hi in rank_batches(con, run, ranks_per_batch):
        run_script(con, "roofline/kernels_fill.sql", {**params, "lo": lo, "hi": hi})
        release(con)  # what the batch freed, not kept for the next


def _most_lost(row: RoofRow) -> tuple[float, str, str]:
    """Most lost time first; ties (equal to 1e-9 ms, whatever the order of summation)
    by shape and op, so the order is the same on every run."""
    return (-round(row.lost_ms or 0.0, 9), row.name, row.op or "")


def _replace(section: Roofline, **changes: object) -> Roofline:
    import msgspec

    return msgspec.structs.replace(section, **changes)


def _above_roof_notes(rows: tuple[RoofRow, ...]) -> list[str]:
    """One note per reason, naming the rows that claim more than their roof."""
    by: dict[str, list[str]] = {}
    for r in rows:
        if r.above_roof is not None and r.name not in by.setdefault(above_roof_reason(r), []):
            by[above_roof_reason(r)].append(r.name)
    out = []
    for reason, names in by.items():
        if not names:
            continue
        shown = ", ".join(n if len(n) <= 60 else n[:59] + "…" for n in names[:3])
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        out.append(f"{reason} ({shown}{more}): no kernel runs above its roof, so their "
                   "share of the roof and lost time are not known and left out")
    return out


def _unsized_note(kinds: tuple[RoofRow, ...]) -> list[str]:
    """Why op kinds with shapes have no GB/s or FLOP/byte: their ops' bytes need each
    input's `Input type`, or, for GEMMs, attention and convolutions, the run's dtype."""
    names = [r.name for r in kinds if r.gbs is None]
    if not names:
        return []
    return [f"no GB/s or FLOP/byte for {', '.join(names)}: the traces give these ops no "
            "`Input type` (torch before 1.10) and the run has no dtype for them (pass "
            "--dtype), so their bytes are not known"]


def chart_note(section: Roofline) -> str | None:
    """Why the kernels-against-roofline chart (dashboard) draws no kernel, or None when it
    draws some: a kernel is a point only with FLOP/s and FLOP/byte on the log axes."""
    if any(r.intensity and r.tflops for r in section.kernels):
        return None
    if not section.kernels:
        return "no kernel is drawn: no kernel of the complete steps belongs to a shaped op"
    if not any(r.tflops for r in section.kernels):
        return ("no kernel is drawn: only elementwise / normalization ops have shapes, and "
                "they count no FLOPs (0 FLOP/byte is off the log axis); their GB/s and "
                "share of the HBM roof are in the table")
    return ("no kernel is drawn: the FLOP/byte of the kernels with FLOPs is not known (their "
            "ops' bytes are not: see the note above)")


def shares_note(section: Roofline) -> str | None:
    """Why the top kernels' share-of-the-roof chart (dashboard) has no bar, or None."""
    if any(r.roof_share is not None for r in section.kernels):
        return None
    if not section.kernels:
        return "no bar: no kernel of the complete steps belongs to a shaped op"
    if section.peak_flops_per_gpu is None and section.hbm_gbs is None:
        return "no bar: neither roof is known for this device (see the note above)"
    return ("no bar: no kernel's share of its roof is known (a roof, its FLOPs or its bytes "
            "are not: see the notes above) or every one claims more than its roof")


def _message(mfu: Mfu, roofs: Roofs, parts: tuple[EfficiencyPart, ...],
             rows: tuple[RoofRow, ...] = (), kinds: tuple[RoofRow, ...] = ()) -> str | None:
    out = _above_roof_notes(rows) + _unsized_note(kinds)
    if mfu.peak_flops_per_gpu is None:
        out.append(f"no compute roof: {mfu.message}")
    if roofs.hbm is None:
        out.append("no HBM bandwidth for this device in the peak table: memory roof unknown")
    if not parts and mfu.peak_flops_per_gpu is not None:
        out.append("the kernel-efficiency stage is not split: no MFU "
                   f"({mfu.message or 'no model FLOPs or compute time'})")
    return "; ".join(out) or None


def _kind_rows(shaped: list[_Group], roofs: Roofs, rank_steps: int,
               total: float) -> tuple[RoofRow, ...]:
    by: dict[tuple[str, str | None], list[_Group]] = {}
    for g in shaped:
        by.setdefault((g["kind"], g["dtype"]), []).append(g)
    rows = [_row(KIND_LABELS.get(kind, kind) + (f" ({dtype})" if dtype else ""), kind, dtype,
                 _sums(members), roofs, rank_steps, total)
            for (kind, dtype), members in by.items()]
    return tuple(sorted(rows, key=lambda r: (-r.time_ms, r.name)))


def _shape_rows(shaped: list[_Group], roofs: Roofs, rank_steps: int,
                total: float) -> list[RoofRow]:
    out = []
    for g in shaped:
        if g["kind"] != "gemm" or g["m"] is None:
            continue
        row = _row(shape_label(g), "gemm", g["dtype"], _sums([g]), roofs, rank_steps, total)
        out.append(_replace_row(row, op=g["op_name"], b=g["b"], m=g["m"], n=g["n"], k=g["k"]))
    return out


def _replace_row(row: RoofRow, **changes: object) -> RoofRow:
    import msgspec

    return msgspec.structs.replace(row, **changes)


def _kernel_rows(ctx: RunContext, roofs: Roofs, rank_steps: int,
                 total: float) -> tuple[RoofRow, ...]:
    rows = _with_dtype(fetch_rows(ctx.con, "roofline/top_kernels.sql", {"limit": KERNELS_SHOWN},
                                  _Kernel), roofs.dtype)
    return tuple(_row(r["kernel"], r["kind"], r["dtype"], _sums([r]), roofs, rank_steps, total)
                 for r in rows)


# ------------------------------------------------------------------ the waterfall's stage
def efficiency_parts(ctx: RunContext, mfu: Mfu, groups: list[_Group], roofs: Roofs,
                     kinds: tuple[RoofRow, ...]
                     ) -> tuple[tuple[EfficiencyPart, ...], float | None]:
    """The kernel-efficiency stage split into parts (module docstring): the GEMMs of one
    weight shape (op, N, K, dtype; any M, the tokens) that lose the most, the other GEMMs,
    then attention, convolutions, elementwise and normalization ops, kernels without
    shapes and the FLOPs no traced kernel carries. () when the report has no MFU."""
    stage = next((w.points for w in mfu.waterfall if w.name == "kernel_efficiency"), None)
    peak, model = mfu.peak_flops_per_gpu, mfu.model_flops_per_step
    compute_s = ctx.attribution.breakdown_ms.compute / 1e3
    wf_total = sum(float(g["wf_time_ns"]) for g in groups)
    if mfu.mfu is None or stage is None or not peak or not model or compute_s <= 0 \
            or wf_total <= 0:
        return (), stage
    world = ctx.world
    buckets: dict[str, list[_Group]] = {}
    for g in groups:
        key = (f"gemm:{g['op_name']}:{g['n']}x{g['k']}:{g['dtype']}"
               if g["kind"] == "gemm" and g["m"] else g["kind"])
        buckets.setdefault(key, []).append(g)

    def points(members: list[_Group]) -> tuple[float, float]:
        t = compute_s * sum(float(g["wf_time_ns"]) for g in members) / wf_total
        f = sum(float(g["wf_model_flops"] or 0) for g in members) / world
        return -100 * (t - f / peak) / compute_s, t

    def roof(members: list[_Group], kind: str) -> RoofRow:
        return _row("", kind, members[0]["dtype"], _sums(members), roofs, 1, wf_total)

    gemm_keys = sorted((k for k in buckets if k.startswith("gemm:")),
                       key=lambda k: (round(points(buckets[k])[0], 9), k))
    named, other = gemm_keys[:GEMM_PARTS], gemm_keys[GEMM_PARTS:]
    if "gemm" in buckets:  # GEMMs without a shape
        other.append("gemm")
    parts: list[EfficiencyPart] = []
    for key in named:
        members = buckets[key]
        g0, ms = members[0], sorted({int(g["m"] or 0) for g in members})
        m_text = f"M {ms[0]}" if len(ms) == 1 else f"M {ms[0]}-{ms[-1]}"
        pts, t = points(members)
        parts.append(_part(key, f"GEMMs Mx{g0['n']}x{g0['k']} ({g0['op_name']}, "
                                f"{g0['dtype']}; {m_text})", pts, t, roof(members, "gemm"),
                           mfu.peak_dtype))
    if other:
        members = [g for k in other for g in buckets[k]]
        pts, t = points(members)
        parts.append(_part("gemm_other", f"{len(other)} other GEMM weight shapes", pts, t,
                           roof(members, "gemm"), mfu.peak_dtype))
    for kind in ("attention", "conv", "elementwise", "normalization"):
        if kind in buckets:
            pts, t = points(buckets[kind])
            parts.append(_part(kind, KIND_LABELS[kind], pts, t,
                               _kind_roof(kinds, kind, roof(buckets[kind], kind)),
                               mfu.peak_dtype))
    if "unshaped" in buckets:
        pts, t = points(buckets["unshaped"])
        parts.append(EfficiencyPart(name="unshaped", label="kernels without shapes "
                                    "(no FLOPs known: optimizer, embedding, ...)",
                                    points=pts, time_ms=t * 1e3))
    traced = sum(float(g["wf_model_flops"] or 0) for g in groups) / world
    residual = 100 * (model / world - traced) / (peak * compute_s)
    if abs(residual) > 1e-9:
        what = ("the spec's FLOPs beyond those of the traced kernels" if mfu.flops_source
                == "spec" else "model FLOPs of ops with no kernel in the complete steps")
        parts.append(EfficiencyPart(name="flops_residual", label=what, points=residual))
    return tuple(parts), stage


def _kind_roof(kinds: tuple[RoofRow, ...], kind: str, combined: RoofRow) -> RoofRow:
    """The kind's row of the roofline table when it has one dtype; over several dtypes
    (the kind's ops of every dtype make one waterfall part) the roof of all of them."""
    rows = [r for r in kinds if r.kind == kind]
    return rows[0] if len(rows) == 1 else combined


def _part(name: str, label: str, points: float, t: float, row: RoofRow,
          peak_dtype: str | None) -> EfficiencyPart:
    share, bound = row.roof_share, row.bound
    if share is not None:
        held = roof_dtype(row.dtype, peak_dtype) or "compute"
        roof = "HBM bandwidth" if bound == "memory" else f"the {held} roof"
        label = f"{label} at {100 * share:.0f}% of {roof}"
    elif row.above_roof is not None:
        label = f"{label} ({above_roof_reason(row)})"
    return EfficiencyPart(name=name, label=label, points=points, time_ms=t * 1e3,
                          roof_share=share, bound=bound, above_roof=row.above_roof)
