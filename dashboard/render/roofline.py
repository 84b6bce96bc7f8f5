"""The report's roofline section (analyzers.results.Roofline) as a render block: op kinds,
the kernel-efficiency stage by op, the GEMM shapes that lose the most, the top kernels
(docs/roofline.md)."""

from __future__ import annotations

from stepscope.analyzers.flops.peaks import peak_label, roof_dtype
from stepscope.analyzers.results import Roofline, RoofRow
from stepscope.dashboard.render.blocks import Section, Table, num, pct, rows

SHAPES_SHOWN = 10
KERNELS_SHOWN = 10
NAME_WIDTH = 70


def _short(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"


def _roof(row: RoofRow, peak_dtype: str | None) -> str:
    """The row's share of its roof, named as the MFU names its peak (fp32 work of a run
    whose fp32 matmuls ran as TF32 is held against the tf32 peak)."""
    if row.above_roof is not None:  # the reason is in the section's note
        return "above HBM (see note)" if row.bound == "memory" else "above peak (see note)"
    if row.roof_share is None:
        return "-"
    roof = "HBM" if row.bound == "memory" else roof_dtype(row.dtype, peak_dtype) or "peak"
    return f"{pct(row.roof_share, 0)} of {roof}"


def _cells(row: RoofRow, peak_dtype: str | None) -> list[str]:
    return [f"{row.time_ms:.3f}", pct(row.time_share, 1), num(row.tflops, ".1f"),
            num(row.gbs, ".0f"), num(row.intensity, ".1f"), row.bound, _roof(row, peak_dtype),
            num(row.lost_ms, ".3f")]


RATE_HEADERS = ("ms/step", "of kernel time", "TFLOP/s", "GB/s", "FLOP/byte", "bound",
                "of roof", "lost ms")


def roofline_block(section: Roofline | None) -> Section | None:
    if section is None:
        return None
    lines = _facts(section)
    if not section.kinds:
        return Section("Kernels against their roofline", "roofline", tuple(lines))
    tables = [Table(("op kind", *RATE_HEADERS), rows([[r.name, *_cells(r, section.peak_dtype)]
                                                       for r in section.kinds]),
                    numeric=(1, 2, 3, 4, 5, 8))]
    if section.kernel_efficiency:
        total = sum(p.points for p in section.kernel_efficiency)
        parts = [[p.label, f"{p.points:.2f}"] for p in section.kernel_efficiency]
        parts.append(["= kernel efficiency stage", f"{total:.2f}"])
        tables.append(Table(("part of the kernel-efficiency stage", "MFU points"), rows(parts),
                            numeric=(1,), title="Kernel efficiency by op"))
    if section.gemm_shapes:
        shapes = [[r.op or "-", r.name, r.dtype or "-", f"{r.time_ms:.3f}",
                   num(r.tflops, ".1f"), _roof(r, section.peak_dtype),
                   num(r.lost_ms, ".3f")]
                  for r in section.gemm_shapes[:SHAPES_SHOWN]]
        tables.append(Table(("op", "shape (B×)M×N×K", "dtype", "ms/step", "TFLOP/s",
                             "of roof", "lost ms"), rows(shapes), numeric=(3, 4, 6),
                            title="GEMM shapes losing the most time"))
    if section.kernels:
        tables.append(Table(("kernel", "kind", *RATE_HEADERS),
                            rows([[_short(r.name), r.kind, *_cells(r, section.peak_dtype)]
                                  for r in section.kernels[:KERNELS_SHOWN]]),
                            numeric=(2, 3, 4, 5, 6, 9), title="Top kernels"))
    return Section("Kernels against their roofline", "roofline", tuple(lines), tuple(tables))


def _facts(section: Roofline) -> list[str]:
    out = []
    peak = section.peak_flops_per_gpu
    if section.device:
        hbm = (f"HBM {section.hbm_gbs:.0f} GB/s ({section.hbm_source})" if section.hbm_gbs
               else "HBM bandwidth unknown")
        roof = (f"{peak / 1e12:.1f} TFLOP/s {peak_label(section.peak_dtype)}" if peak
                else "no compute peak")
        out.append(f"{section.device}: {roof}, {hbm}; peak table {section.peak_table_version}")
    if section.ridge_flops_per_byte:
        out.append(f"ridge point {section.ridge_flops_per_byte:.0f} FLOP/byte: ops below it "
                   "are held against HBM bandwidth, above it against the compute peak")
    if section.kinds:
        out.append(f"{pct(section.coverage, 0)} of compute-kernel time is in ops with shapes")
    if section.message:
        out.append(f"note: {section.message}")
    return out
