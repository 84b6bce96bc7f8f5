"""Hardware peaks (analyzers/data/peaks.json): a versioned table with provenance.

A device is matched from its `deviceProperties` name (patterns are whole tokens, so
"H20" never matches "H200" and "B200" never matches "GB200"), or for ROCm devices that
report a generic name, from properties. An unknown device never falls back to another.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

import duckdb
import msgspec

from stepscope.analyzers._sql import sql
from stepscope.ingest.errors import UsageError

DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")


def roof_dtype(dtype: str | None, peak_dtype: str | None) -> str | None:
    """The peak-table column work of `dtype` is held against when the run's MFU peak is
    `peak_dtype` (mfu.peak_dtype): fp32 matmuls that ran as TF32 take the TF32 peak, every
    other dtype its own (docs/mfu.md). The MFU headline and the roofline both name their
    peak through this, so they say the same thing."""
    return "tf32" if dtype in ("fp32", "tf32") and peak_dtype == "tf32" else dtype


def peak_label(peak_dtype: str | None, dtype: str | None = None) -> str:
    """The name of the peak in the MFU headline and the roofline's: the peak-table column
    used (mfu.peak_dtype, `tf32` when fp32 matmuls ran as TF32), never the data type
    beside it, so "156.0 TFLOP/s tf32" reads the same in both sections."""
    return peak_dtype or dtype or "unknown dtype"


@dataclass(frozen=True)
class DevicePeak:
    id: str
    name: str
    tflops: dict[str, float | None]
    hbm_gbs: float | None
    interconnect: str | None
    interconnect_gbs: float | None
    source: str
    confidence: str
    memory_gb: float | None = None      # capacity (the traces' totalGlobalMem wins)
    hbm_source: str | None = None       # where hbm_gbs comes from

    def flops(self, dtype: str) -> float | None:
        """Peak FLOP/s for a dtype, or None when the device has no such peak."""
        value = self.tflops.get(dtype)
        return None if value is None else value * 1e12


class PeakEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One device of analyzers/data/peaks.json, as written there (TFLOP/s, GB/s)."""
    id: str
    name: str
    match: tuple[str, ...]                       # whole-token patterns of the device name
    match_properties: dict[str, str | int] | None = None  # generic ROCm names
    bf16: float | None
    fp16: float | None
    fp8: float | None
    tf32: float | None
    fp32: float | None
    hbm_gbs: float | None
    memory_gb: float | None = None
    hbm_source: str | None = None
    interconnect: str | None
    interconnect_gbs: float | None
    source: str
    confidence: str

    def tflops(self) -> dict[str, float | None]:
        return {"bf16": self.bf16, "fp16": self.fp16, "fp8": self.fp8, "tf32": self.tf32,
                "fp32": self.fp32}


class PeakTable(msgspec.Struct, frozen=True, kw_only=True):
    version: str
    description: str
    devices: tuple[PeakEntry, ...]


@cache
def table() -> PeakTable:
    """The peak table, validated against PeakTable when it is read."""
    text = resources.files("stepscope.analyzers").joinpath("data/peaks.json").read_text()
    return msgspec.json.decode(text, type=PeakTable)


def table_version() -> str:
    return table().version


def _pattern(token: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(token)}(?![A-Za-z0-9])", re.IGNORECASE)


def _entry(raw: PeakEntry) -> DevicePeak:
    return DevicePeak(
        id=raw.id, name=raw.name, tflops=raw.tflops(), hbm_gbs=raw.hbm_gbs,
        interconnect=raw.interconnect, interconnect_gbs=raw.interconnect_gbs,
        source=raw.source, confidence=raw.confidence, memory_gb=raw.memory_gb,
        hbm_source=raw.hbm_source)


def _property(props: Mapping[str, object], key: str) -> object:
    """A deviceProperties value, or `memory_gib`: totalGlobalMem in whole GiB (an MI300X
    reports 206,141,652,992 bytes, 191.98 GiB -> 192), which tells apart devices of one
    architecture and CU count (MI300X 192 GB, MI325X 256 GB)."""
    if key == "memory_gib":
        total = props.get("totalGlobalMem")
        return round(total / 2**30) if isinstance(total, int) and total > 0 else None
    return props.get(key)


def lookup(device_name: str | None, properties: Mapping[str, object] | None = None
           ) -> DevicePeak | None:
    """The table entry for a device, or None when it is not known."""
    props = properties or {}
    for raw in table().devices:
        if device_name and any(_pattern(tok).search(device_name) for tok in raw.match):
            return _entry(raw)
        want = raw.match_properties
        if want and all(_property(props, k) == v for k, v in want.items()):
            return _entry(raw)
    return None


def resolve_device(name: str) -> DevicePeak:
    """A device as a user names it ('H100', 'NVIDIA H200', 'MI300X', 'A100-SXM'); UsageError
    naming the option and examples when the table has no such device."""
    for guess in (lookup(name), by_id(name), by_id(f"{name}-SXM"),
                  lookup(f"NVIDIA {name}"), lookup(f"AMD Instinct {name}")):
        if guess is not None:
            return guess
    raise UsageError(f"--gpu {name}: not in the peak table; use a name such as H100, "
                     "H200, B200, A100-SXM, MI300X")


def by_id(device_id: str) -> DevicePeak | None:
    for raw in table().devices:
        if raw.id.lower() == device_id.lower():
            return _entry(raw)
    return None


@dataclass(frozen=True)
class RunDevice:
    """The device most ranks of a run ran on, and its table entry."""
    name: str | None
    properties: dict[str, object]   # the trace's deviceProperties entry, as written
    peak: DevicePeak | None
    kinds: int          # distinct device names among the ranks
    has_gpu: bool       # some rank ran GPU ops (even if the trace does not name the GPU)

    @property
    def nvlink_gbs(self) -> float | None:
        """Scale-up bandwidth per direction (the table gives bidirectional totals)."""
        if self.peak is None or self.peak.interconnect_gbs is None:
            return None
        return self.peak.interconnect_gbs / 2




def run_device(con: duckdb.DuckDBPyConnection, run: str) -> RunDevice:
    rows = con.execute(sql("mfu/run_device.sql"), {"run": run}).fetchall()
    if not rows:
        return RunDevice(None, {}, None, 0, False)
    name, props_raw, _, has_gpu = rows[0]
    name = name.strip() or None if name else None  # vLLM writes "": a GPU without a name
    props = json.loads(props_raw) if props_raw else {}
    peak = lookup(name, props) if name or props else None
    return RunDevice(name, props, peak, len(rows), bool(has_gpu))
